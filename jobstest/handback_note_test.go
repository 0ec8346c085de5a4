package jobstest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/jobstest"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// noteGate is a memory store that holds the answer of the first hand-back for later (a mutation
// to delayed) until the run's history has been read and the run read again after that: the look
// of Await at the delayed run then falls, every time, between the hand-back's commit and the
// engine's note of why (which the engine adds once the commit is answered).
type noteGate struct {
	store.Store
	mu        sync.Mutex
	run       string // the run of the held hand-back, once it committed
	inspected bool   // its history was read while the answer was held
	release   chan struct{}
	once      sync.Once
}

func (g *noteGate) RunApply(ctx context.Context, ms []store.Mutation) ([]store.MutationResult, error) {
	res, err := g.Store.RunApply(ctx, ms)
	if err != nil {
		return res, err
	}
	for i, m := range ms {
		if m.State != store.StateDelayed || res[i].Err != nil {
			continue
		}
		g.mu.Lock()
		first := g.run == ""
		if first {
			g.run = m.RunID
		}
		g.mu.Unlock()
		if first {
			select {
			case <-g.release:
			case <-time.After(5 * time.Second): // nobody looked: let the engine go on
			}
		}
	}
	return res, err
}

func (g *noteGate) HistoryRead(ctx context.Context, runID string, afterSeq int64, limit int) ([]history.Event, error) {
	g.mu.Lock()
	if runID == g.run {
		g.inspected = true
	}
	g.mu.Unlock()
	return g.Store.HistoryRead(ctx, runID, afterSeq, limit)
}

func (g *noteGate) RunGet(ctx context.Context, id string) (store.Run, error) {
	g.mu.Lock()
	if id == g.run && g.inspected {
		g.once.Do(func() { close(g.release) })
	}
	g.mu.Unlock()
	return g.Store.RunGet(ctx, id)
}

// Await looks again at a delayed run whose view said nothing yet: the engine notes a hand-back
// once the hand-back has committed, and an Await that settled the delay on the look in between
// never moved the clock to the hand-back's timer, leaving the run delayed for good. Here the look
// always falls in between (noteGate), and b still completes.
func TestAwaitLooksAgainAtAHandBackNotYetNoted(t *testing.T) {
	t.Parallel()
	var env *jobstest.Env
	aRuns := make(chan struct{})
	var aRan sync.Once
	held := jobs.MustDefine("drive-tenant-noted", func(in tenantOrder) string { return in.ID },
		jobs.TenantFrom(func(in tenantOrder) string { return in.Tenant }),
		func(c *jobs.Ctx, in tenantOrder) (string, error) {
			return jobs.Step(c, "work", func(context.Context) (string, error) {
				if in.ID == "a" { // holds the tenant's one place until b was handed back once
					aRan.Do(func() { close(aRuns) })
					deadline := time.Now().Add(10 * time.Second)
					for env.Worker.HandedBack(jobs.DefaultQueue, worker.HandBackTenant) < 1 && time.Now().Before(deadline) {
						time.Sleep(time.Millisecond)
					}
				}
				return "done-" + in.ID, nil
			})
		})
	gate := &noteGate{Store: memory.New(), release: make(chan struct{})}
	env = jobstest.New(t, jobstest.Options{Store: gate, Worker: worker.Config{Limits: worker.LimitConfig{PerTenant: 1}}}, held)
	a := jobstest.Enqueue(env, held, tenantOrder{ID: "a", Tenant: "acme"})
	select {
	case <-aRuns:
	case <-time.After(20 * time.Second):
		t.Fatalf("a's body did not start (run %s)", a)
	}
	b := jobstest.Enqueue(env, held, tenantOrder{ID: "b", Tenant: "acme"})
	if got := jobstest.Result(env, held, b); got != "done-b" {
		t.Fatalf("b: %q", got)
	}
	gate.mu.Lock()
	held1, looked := gate.run, gate.inspected
	gate.mu.Unlock()
	if held1 != b || !looked {
		t.Errorf("the gate held the hand-back of %q (b is %s), looked at while held: %v; want b's, looked at", held1, b, looked)
	}
	if got := jobstest.Result(env, held, a); got != "done-a" {
		t.Fatalf("a: %q", got)
	}
}
