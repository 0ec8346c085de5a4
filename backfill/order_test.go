package backfill_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// holdingFrontend holds every page's checkpoint on its way to the engine, long enough for a
// pass that did not wait for it to run the next page's handler, and says which checkpoints the
// engine has acknowledged (made durable).
type holdingFrontend struct {
	frontend.Frontend
	mu      sync.Mutex
	landed  map[int]bool // page index → its checkpoint was acknowledged
	readHit map[int]bool // page index → the source was asked for it before the previous checkpoint landed
	ahead   chan int     // the pages the source was asked for
}

func newHoldingFrontend(fe frontend.Frontend) *holdingFrontend {
	return &holdingFrontend{Frontend: fe, landed: map[int]bool{}, readHit: map[int]bool{}, ahead: make(chan int, 64)}
}

func (h *holdingFrontend) Record(ctx context.Context, req frontend.RecordRequest) (frontend.RecordResponse, error) {
	page := -1
	for _, c := range req.Commands {
		if c.Kind == frontend.CmdStep && strings.HasPrefix(c.Name, "batch:") {
			page, _ = strconv.Atoi(strings.TrimPrefix(c.Name, "batch:"))
		}
	}
	if page < 0 {
		return h.Frontend.Record(ctx, req)
	}
	// Hold until the source was asked for the next page (the read-ahead), or for a while when no
	// read comes (the last page): either way long enough for a next handler that does not wait.
	deadline := time.After(300 * time.Millisecond)
wait:
	for {
		select {
		case p := <-h.ahead:
			if p == page+1 {
				time.Sleep(20 * time.Millisecond) // room for a handler that would run now
				break wait
			}
		case <-deadline:
			break wait
		}
	}
	resp, err := h.Frontend.Record(ctx, req)
	h.mu.Lock()
	if err == nil {
		h.landed[page] = true
	}
	h.mu.Unlock()
	return resp, err
}

// A page's handler never runs before the previous page's checkpoint is durable: that is what
// makes a resume re-run at most one page. The next page's statement may (and does) run while
// the checkpoint is in flight.
func TestAHandlerWaitsForThePreviousCheckpointToBeDurable(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, env *testenv.Env) {
		tb := newTable(20)
		fe := newHoldingFrontend(env.Engine)
		var mu sync.Mutex
		var violations []string
		inner := tb.source()
		pageOf := map[string]int{} // cursor → the page it starts
		src := backfill.SourceFunc[row](func(ctx context.Context, req backfill.PageRequest) ([]row, backfill.Cursor, error) {
			mu.Lock()
			page := pageOf[fmt.Sprint(req.After)]
			mu.Unlock()
			fe.mu.Lock()
			if page > 0 && !fe.landed[page-1] {
				fe.readHit[page] = true
			}
			fe.mu.Unlock()
			rows, next, err := inner.Page(ctx, req)
			if err == nil && next != nil {
				mu.Lock()
				pageOf[fmt.Sprint(next)] = page + 1
				mu.Unlock()
			}
			select {
			case fe.ahead <- page:
			default:
			}
			return rows, next, err
		})
		handle := func(ctx context.Context, b backfill.Batch[row]) error {
			if b.Index > 0 {
				fe.mu.Lock()
				ok := fe.landed[b.Index-1]
				fe.mu.Unlock()
				if !ok {
					mu.Lock()
					violations = append(violations, fmt.Sprintf("page %d handled before page %d's checkpoint was durable", b.Index, b.Index-1))
					mu.Unlock()
				}
			}
			return tb.handle(ctx, b)
		}
		b := backfill.MustDefine("checkpoint-order", backfill.AllTenants(), src, handle, backfill.BatchSize(4), backfill.Rate(1e6))
		env.Worker(workerConfig(fe), b)
		sweepTwenty(t, env, b, &mu, &violations)
		mu.Lock()
		defer mu.Unlock()
		fe.mu.Lock()
		defer fe.mu.Unlock()
		if len(fe.readHit) == 0 {
			t.Fatal("no page was read while the previous checkpoint was in flight: the read-ahead is gone")
		}
	})
}

// slowReports holds the first progress report (Status "") until the pass has handled `until`
// pages, or for a long while.
type slowReports struct {
	frontend.Frontend
	handled chan int
	until   int
	once    sync.Once
	gotEnd  chan frontend.BackfillReportRequest
}

func (s *slowReports) BackfillReport(ctx context.Context, req frontend.BackfillReportRequest) error {
	if req.Status != "" {
		s.gotEnd <- req
		return s.Frontend.BackfillReport(ctx, req)
	}
	first := false
	s.once.Do(func() { first = true })
	if first {
		deadline := time.After(5 * time.Second)
	wait:
		for {
			select {
			case i := <-s.handled:
				if i >= s.until {
					break wait
				}
			case <-deadline:
				break wait
			}
		}
	}
	return s.Frontend.BackfillReport(ctx, req)
}

// A progress report is a report for people: a slow ledger write does not hold the next page
// (the report travels beside the pages, never between a checkpoint and the next handler), and
// the pass's end still lands after it, with the final figures.
func TestASlowProgressReportDoesNotHoldThePages(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, env *testenv.Env) {
		tb := newTable(12)
		fe := &slowReports{Frontend: env.Engine, handled: make(chan int, 64), until: 2, gotEnd: make(chan frontend.BackfillReportRequest, 4)}
		handle := func(ctx context.Context, b backfill.Batch[row]) error {
			err := tb.handle(ctx, b)
			fe.handled <- b.Index
			return err
		}
		b := backfill.MustDefine("slow-reports", backfill.AllTenants(), tb.source(), handle, backfill.BatchSize(3), backfill.Rate(1e6))
		env.Worker(workerConfig(fe), b)
		began := time.Now()
		res := enqueue(t, env, b, backfill.Input{})
		out := result(t, b, env.Await(res.RunID, store.StateCompleted))
		if took := time.Since(began); took > 4*time.Second {
			t.Fatalf("the pass took %v: the first progress report held the pages", took)
		}
		if out.Rows != 12 {
			t.Fatalf("result = %+v", out)
		}
		end := <-fe.gotEnd
		rows := ledger(t, env, "slow-reports")
		if end.Status != backfill.StatusCompleted || len(rows) != 1 || rows[0].Status != backfill.StatusCompleted ||
			rows[0].Rows != 12 || rows[0].Batches != 5 || rows[0].Cursor != "[12]" {
			t.Fatalf("end %+v, ledger %+v; want the completed row with the final figures", end, rows)
		}
	})
}

// With OverlapCheckpoints a page's handler runs while the previous page's checkpoint commits, so
// the checkpoint leaves the pages' critical path: per page, the path holds the handler and the
// next read, no commit of ours. What stays: a page's checkpoint is recorded only after its own
// handler returned and the previous checkpoint landed, and no page is handled twice.
func TestOverlapCheckpointsHandlesAPageWhileThePreviousCheckpointCommits(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, env *testenv.Env) {
		tb := newTable(20)
		fe := newHoldingFrontend(env.Engine)
		var mu sync.Mutex
		var onPath []int           // pages whose handler ran while the previous checkpoint was in flight
		returned := map[int]bool{} // pages whose handler returned
		var violations []string
		inner := tb.source()
		src := backfill.SourceFunc[row](func(ctx context.Context, req backfill.PageRequest) ([]row, backfill.Cursor, error) {
			page := 0
			if req.After != nil {
				n, _ := backfill.ParseCount(req.After[0])
				page = int(n) / 4
			}
			rows, next, err := inner.Page(ctx, req)
			select {
			case fe.ahead <- page:
			default:
			}
			return rows, next, err
		})
		handle := func(ctx context.Context, b backfill.Batch[row]) error {
			if b.Index > 0 {
				fe.mu.Lock()
				inFlight := !fe.landed[b.Index-1]
				fe.mu.Unlock()
				if inFlight {
					mu.Lock()
					onPath = append(onPath, b.Index)
					mu.Unlock()
				}
			}
			err := tb.handle(ctx, b)
			mu.Lock()
			returned[b.Index] = true
			mu.Unlock()
			return err
		}
		b := backfill.MustDefine("checkpoint-overlap", backfill.AllTenants(), src, handle, backfill.BatchSize(4),
			backfill.Rate(1e6), backfill.OverlapCheckpoints())
		checking := &orderCheck{Frontend: fe, check: func(page int) {
			mu.Lock()
			defer mu.Unlock()
			if !returned[page] && page < 5 {
				violations = append(violations, fmt.Sprintf("batch:%d recorded before its handler returned", page))
			}
			fe.mu.Lock()
			defer fe.mu.Unlock()
			if page > 0 && !fe.landed[page-1] {
				violations = append(violations, fmt.Sprintf("batch:%d recorded before batch:%d landed", page, page-1))
			}
		}}
		env.Worker(workerConfig(checking), b)
		sweepTwenty(t, env, b, &mu, &violations)
		mu.Lock()
		defer mu.Unlock()
		if len(onPath) == 0 {
			t.Fatal("every handler waited for the previous checkpoint: the checkpoint's commit is still on the pages' path")
		}
		tb.mu.Lock()
		defer tb.mu.Unlock()
		for id, n := range tb.handled {
			if n != 1 {
				t.Fatalf("row %d handled %d times", id, n)
			}
		}
	})
}

// sweepTwenty runs the pass b over the test's 20 rows (batches of 4) to completion, checks its
// result, and fails on any violation the handlers collected under mu.
func sweepTwenty[T any](t *testing.T, env *testenv.Env, b *backfill.Backfill[T], mu *sync.Mutex, violations *[]string) {
	t.Helper()
	res := enqueue(t, env, b, backfill.Input{})
	out := result(t, b, env.Await(res.RunID, store.StateCompleted))
	if out.Rows != 20 || out.Batches != 6 {
		t.Fatalf("result = %+v; want 20 rows in 6 batches (the last one empty)", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(*violations) > 0 {
		t.Fatal(strings.Join(*violations, "; "))
	}
}

// orderCheck sees each page's checkpoint before it is sent.
type orderCheck struct {
	frontend.Frontend
	check func(page int)
}

func (o *orderCheck) Record(ctx context.Context, req frontend.RecordRequest) (frontend.RecordResponse, error) {
	for _, c := range req.Commands {
		if c.Kind == frontend.CmdStep && strings.HasPrefix(c.Name, "batch:") {
			page, _ := strconv.Atoi(strings.TrimPrefix(c.Name, "batch:"))
			o.check(page)
		}
	}
	return o.Frontend.Record(ctx, req)
}
