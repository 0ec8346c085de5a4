package backfill_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// eventually waits (wall clock) for cond, calling step between looks.
func eventually(t *testing.T, what string, cond func() bool, step func()) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		if step != nil {
			step()
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The pause a rate imposes is spent inside each page's step, so a resumed attempt replays its
// completed pages without paying their pauses: on a fake clock that nobody advances, the retry
// reaches the failed page at once.
func TestRatePausesAreNotRepaidOnResume(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		tb := newTable(5)
		tb.failPage[3] = 1
		b := backfill.MustDefine("paced", backfill.AllTenants(), tb.source(), tb.handle,
			backfill.BatchSize(1), backfill.Rate(1), fastRetry) // one page a second of the fake clock
		res := enqueue(t, env, b, backfill.Input{})
		// The first attempt: each page after the first waits for a second of the fake clock.
		// The worker starts after the enqueue, so no page can have run before the claim.
		if tb.pageCalls(0) != 0 {
			t.Fatal("a page ran before the run was claimed")
		}
		startWorker(env, "", b)
		eventually(t, "page 0", func() bool { return tb.pageCalls(0) == 1 }, nil)
		time.Sleep(50 * time.Millisecond)
		if tb.pageCalls(1) != 0 {
			t.Fatal("page 1 ran without its pause")
		}
		eventually(t, "page 3's failure", func() bool { return tb.pageCalls(3) == 1 }, func() { env.Fake().Advance(time.Second) })
		env.Await(res.RunID, store.StateDelayed)

		// The retry: fire its timer, then never move the clock again.
		env.Advance(time.Second)
		eventually(t, "page 3 retried without any pause", func() bool { return tb.pageCalls(3) == 2 }, nil)
		if tb.pageCalls(0) != 1 || tb.pageCalls(1) != 1 || tb.pageCalls(2) != 1 {
			t.Fatalf("pages handled %v; want 0-2 once (replayed)", tb.perPage)
		}
		eventually(t, "the pass to complete", func() bool {
			r, _ := env.Engine.GetRun(context.Background(), res.RunID)
			return r.State == store.StateCompleted
		}, func() { env.Fake().Advance(time.Second) })
	})
}

// A pause ends at once when the run is cancelled: the body does not sit in a timer nobody waits
// for, so the worker drains at once.
func TestCancelEndsThePause(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{Lease: 300 * time.Millisecond}, func(t *testing.T, env *testenv.Env) {
		tb := newTable(5)
		b := backfill.MustDefine("slow", backfill.AllTenants(), tb.source(), tb.handle,
			backfill.BatchSize(1), backfill.Rate(0.001)) // a page every 1,000 s
		w := startWorker(env, "", b)
		res := enqueue(t, env, b, backfill.Input{})
		eventually(t, "page 0", func() bool { return tb.pageCalls(0) == 1 }, nil)
		eventually(t, "the step of page 0 recorded", func() bool { return len(stepNames(env, res.RunID)) == 1 }, nil)
		if _, err := env.Engine.Cancel(context.Background(), res.RunID, "test"); err != nil {
			t.Fatal(err)
		}
		// The worker hears of the cancel at its next heartbeat (a third of the lease, wall
		// clock) and cancels the body; the pause must end then, not in 1,000 s.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Fatalf("the worker could not drain: the pause outlived the cancel (%v)", err)
		}
		if tb.pageCalls(1) != 0 {
			t.Fatal("page 1 ran after the cancel")
		}
		rows := ledger(t, env, "slow")
		if len(rows) != 1 || rows[0].Status != backfill.StatusFailed || rows[0].Rows != 1 {
			t.Fatalf("ledger = %+v; want the cancelled pass reported failed after 1 row", rows)
		}
	})
}

// lateProgress holds the pass's first progress report until the run has been cancelled and the
// worker has had time to cancel the body, then sends it under the context it was given.
type lateProgress struct {
	frontend.Frontend
	env  *testenv.Env
	once sync.Once
}

func (l *lateProgress) BackfillReport(ctx context.Context, req frontend.BackfillReportRequest) error {
	if req.Status == "" {
		l.once.Do(func() {
			_, _ = l.env.Engine.Cancel(context.Background(), req.RunID, "test")
			// The worker hears of the cancel at its next heartbeat (a third of the lease) and
			// cancels the body's context; a report sent under that context ends here.
			select {
			case <-ctx.Done():
			case <-time.After(3 * time.Second):
			}
		})
	}
	return l.Frontend.BackfillReport(ctx, req)
}

// A progress report on its way when the run is cancelled still lands: the page is in the
// history, and the ledger of the cancelled pass counts its rows.
func TestProgressReportOutlivesTheCancel(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{Lease: 300 * time.Millisecond}, func(t *testing.T, env *testenv.Env) {
		tb := newTable(5)
		b := backfill.MustDefine("late", backfill.AllTenants(), tb.source(), tb.handle,
			backfill.BatchSize(1), backfill.Rate(0.001)) // a page every 1,000 s
		env.Worker(workerConfig(&lateProgress{Frontend: env.Engine, env: env}), b)
		res := enqueue(t, env, b, backfill.Input{})
		env.Await(res.RunID, store.StateCancelled)
		eventually(t, "the ledger's row of the cancelled pass", func() bool {
			rows := ledger(t, env, "late")
			return len(rows) == 1 && rows[0].Status == backfill.StatusFailed && rows[0].Rows == 1
		}, nil)
	})
}
