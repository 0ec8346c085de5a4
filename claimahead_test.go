package jobs_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// aheadProbe holds complete records back for up to hold until a run was claimed while one was
// held: the poller's next claim overlapping the last record's commit.
type aheadProbe struct {
	frontend.Frontend
	hold     time.Duration
	held     atomic.Int32
	overlaps atomic.Int32
	claimed  chan struct{}
}

func (p *aheadProbe) Record(ctx context.Context, req frontend.RecordRequest) (frontend.RecordResponse, error) {
	if n := len(req.Commands); n > 0 && req.Commands[n-1].Kind == frontend.CmdComplete && p.overlaps.Load() == 0 {
		p.held.Add(1)
		select {
		case <-p.claimed:
		case <-time.After(p.hold):
		}
		p.held.Add(-1)
	}
	return p.Frontend.Record(ctx, req)
}

func (p *aheadProbe) Poll(ctx context.Context, req frontend.PollRequest) ([]frontend.Task, error) {
	tasks, err := p.Frontend.Poll(ctx, req)
	if len(tasks) > 0 && p.held.Load() > 0 {
		p.overlaps.Add(1)
		select {
		case p.claimed <- struct{}{}:
		default:
		}
	}
	return tasks, err
}

// A claim's slot goes back to the poller as its last record is sent, so the next run is claimed
// while that record commits; never more bodies run than the queue's concurrency. A job under a
// fleet cap, or a worker with NoClaimAhead, keeps the slot until the record's answer is back.
func TestClaimAheadOfTheLastRecord(t *testing.T) {
	cases := []struct {
		name    string
		opts    []jobs.Option
		noAhead bool
		ahead   bool
	}{
		{name: "plain", ahead: true},
		{name: "fleet-cap", opts: []jobs.Option{jobs.Concurrency(5)}},
		{name: "switched-off", noAhead: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testenv.EachBackend(t, testenv.Options{Clock: clock.Real{}}, func(t *testing.T, env *testenv.Env) {
				var running, peak atomic.Int32
				j := jobs.MustDefine("ahead-"+c.name, func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
					func(cx *jobs.Ctx, in int) (int, error) {
						n := running.Add(1)
						defer running.Add(-1)
						for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
						}
						return jobs.Step(cx, "one", func(context.Context) (int, error) { return in, nil })
					}, c.opts...)
				hold := 3 * time.Second
				if !c.ahead {
					hold = 300 * time.Millisecond // nothing will release it early
				}
				probe := &aheadProbe{Frontend: env.Engine, hold: hold, claimed: make(chan struct{}, 1)}
				var ids []string
				for i := range 3 {
					ids = append(ids, enqueue(t, env, j, i))
				}
				env.Worker(worker.Config{Frontend: probe, Concurrency: 1, NoClaimAhead: c.noAhead}, j)
				for _, id := range ids {
					if run := env.Await(id, store.StateCompleted); run.Attempt != 1 {
						t.Fatalf("run %s completed on attempt %d", id, run.Attempt)
					}
				}
				if got := peak.Load(); got != 1 {
					t.Errorf("%d bodies ran at once with concurrency 1", got)
				}
				if got := probe.overlaps.Load(); c.ahead && got == 0 {
					t.Errorf("no run was claimed while a last record was in flight")
				} else if !c.ahead && got != 0 {
					t.Errorf("%d runs were claimed while a last record was in flight; the slot should be kept", got)
				}
			})
		})
	}
}

// holdingCompletions is the engine with every completion record held until release is closed.
type holdingCompletions struct {
	frontend.Frontend
	release chan struct{}
	held    atomic.Int32
}

func (h *holdingCompletions) Record(ctx context.Context, req frontend.RecordRequest) (frontend.RecordResponse, error) {
	for _, c := range req.Commands {
		if c.Kind == frontend.CmdComplete {
			h.held.Add(1)
			<-h.release
			break
		}
	}
	return h.Frontend.Record(ctx, req)
}

// Claiming ahead is bounded: with every completion held, a worker of Concurrency 1 starts a
// second body while the first completes, but not a third.
func TestWorkerClaimsAtMostTwiceItsConcurrency(t *testing.T) {
	env := newEnv(t)
	var mu sync.Mutex
	started := map[int]bool{}
	startedCh := make(chan int, 10)
	j := jobs.MustDefine("claim-ahead", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(_ *jobs.Ctx, in int) (int, error) {
			mu.Lock()
			if !started[in] {
				started[in] = true
				startedCh <- in
			}
			mu.Unlock()
			return in, nil
		})
	ids := make([]string, 3)
	for i := range ids {
		ids[i] = enqueue(t, env, j, i)
	}
	fe := &holdingCompletions{Frontend: env.Engine, release: make(chan struct{})}
	released := false
	defer func() {
		if !released {
			close(fe.release)
		}
	}()
	env.Worker(worker.Config{Frontend: fe, Concurrency: 1}, j)

	// With one slot, the second body starts while the first completion is held.
	for n := 0; n < 2; n++ {
		select {
		case <-startedCh:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of 3 bodies started while the first completion was held; want 2", n)
		}
	}
	// Two claims held (both completing): the third waits for one of them.
	select {
	case i := <-startedCh:
		t.Fatalf("run %d started while two claims of a worker with Concurrency 1 were still completing", i)
	case <-time.After(300 * time.Millisecond):
	}
	if h := fe.held.Load(); h != 2 {
		t.Fatalf("%d completions held, want 2", h)
	}
	close(fe.release)
	released = true
	for _, id := range ids {
		env.Await(id, store.StateCompleted)
	}
}
