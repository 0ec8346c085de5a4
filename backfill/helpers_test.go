package backfill_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// table is an application's table in memory: rows keyed by id, each with a tenant and a flag the
// backfill sets. It counts the statements and the rows each page handled.
type table struct {
	mu       sync.Mutex
	rows     map[int]*row
	pages    int         // statements run
	handled  map[int]int // id → times handled
	perPage  map[int]int // page index → times handled
	failPage map[int]int // page index → failures still to inject
}

type row struct {
	ID     int    `json:"id"`
	Tenant string `json:"tenant"`
	Done   bool   `json:"done"`
}

func newTable(n int) *table {
	t := &table{rows: map[int]*row{}, handled: map[int]int{}, perPage: map[int]int{}, failPage: map[int]int{}}
	for i := 1; i <= n; i++ {
		t.rows[i] = &row{ID: i, Tenant: fmt.Sprintf("org-%d", i%2)}
	}
	return t
}

// source pages the rows not yet done, keyset on id.
func (t *table) source() backfill.Source[row] {
	return backfill.SourceFunc[row](func(_ context.Context, req backfill.PageRequest) ([]row, backfill.Cursor, error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.pages++
		after := int64(0)
		if req.After != nil {
			n, err := backfill.ParseCount(req.After[0])
			if err != nil {
				return nil, nil, err
			}
			after = n
		}
		var ids []int
		for id, r := range t.rows {
			if int64(id) > after && !r.Done && (req.Tenant == "" || r.Tenant == req.Tenant) {
				ids = append(ids, id)
			}
		}
		sort.Ints(ids)
		if len(ids) > req.Limit {
			ids = ids[:req.Limit]
		}
		out := make([]row, len(ids))
		for i, id := range ids {
			out[i] = *t.rows[id]
		}
		if len(out) == 0 {
			return nil, nil, nil
		}
		return out, backfill.Cursor{int64(out[len(out)-1].ID)}, nil
	})
}

func (t *table) handle(_ context.Context, b backfill.Batch[row]) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.perPage[b.Index]++
	if t.failPage[b.Index] > 0 {
		t.failPage[b.Index]--
		return fmt.Errorf("injected failure on page %d", b.Index)
	}
	for _, r := range b.Rows {
		t.rows[r.ID].Done = true
		t.handled[r.ID]++
	}
	return nil
}

// left counts the rows still to do: the count a backfill declares.
func (t *table) left(context.Context) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := int64(0)
	for _, r := range t.rows {
		if !r.Done {
			n++
		}
	}
	return n, nil
}

// leftOf counts the rows of the pass's tenant still to do (every tenant's for ""): the count a
// per-tenant backfill declares with CountFor.
func (t *table) leftOf(_ context.Context, req backfill.CountRequest) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := int64(0)
	for _, r := range t.rows {
		if !r.Done && (req.Tenant == "" || r.Tenant == req.Tenant) {
			n++
		}
	}
	return n, nil
}

func (t *table) pageCalls(i int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.perPage[i]
}

func (t *table) statements() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pages
}

// fastRetry retries at once: the tests are about the pass, not the backoff.
var fastRetry = backfill.JobOptions(jobs.Retry(jobs.RetryPolicy{Attempts: 5, Backoff: jobs.Fixed, Delay: time.Millisecond}))

// start runs an engine over each backend with a real clock (the throttle's waits are real but
// tiny at the rates these tests declare) and a worker in environment env hosting defs.
func eachBackend(t *testing.T, f func(t *testing.T, env *testenv.Env)) {
	testenv.EachBackend(t, testenv.Options{Clock: clock.Real{}}, f)
}

func startWorker(env *testenv.Env, environment string, defs ...jobs.Definition) *worker.Worker {
	return env.Worker(worker.Config{PollWait: 100 * time.Millisecond, BaseContext: func() context.Context {
		return backfill.WithRuntime(context.Background(), backfill.Runtime{Environment: environment, AppVersion: "test-1"})
	}}, defs...)
}

func enqueue[R any](t *testing.T, env *testenv.Env, b *backfill.Backfill[R], in backfill.Input) jobs.EnqueueResult {
	t.Helper()
	res, err := b.Enqueue(context.Background(), env.Engine, in)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func result[R any](t *testing.T, b *backfill.Backfill[R], run store.Run) backfill.Result {
	t.Helper()
	out, err := b.Result(run.Result)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func ledger(t *testing.T, env *testenv.Env, name string) []backfill.Progress {
	t.Helper()
	rows, err := env.Engine.InspectBackfills(context.Background(), store.BackfillFilter{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func stepNames(env *testenv.Env, runID string) []string {
	var out []string
	for _, k := range testenv.Kinds(env.History(runID)) {
		if len(k) > len("StepCompleted:") && k[:len("StepCompleted:")] == "StepCompleted:" {
			out = append(out, k[len("StepCompleted:"):])
		}
	}
	return out
}

func workerConfig(fe frontend.Frontend) worker.Config {
	return worker.Config{Frontend: fe, PollWait: 100 * time.Millisecond}
}

func stepOutput(t *testing.T, ev history.Event) []byte {
	t.Helper()
	p, err := ev.Decode()
	if err != nil {
		t.Fatal(err)
	}
	return p.(history.StepCompleted).Output
}
