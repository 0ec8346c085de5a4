package jobstest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/jobstest"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// fatalRecorder stands in for a test's testing.TB: it records what a kit function reports, and
// its Fatal ends the calling goroutine as testing.T's does, without ending the real test.
type fatalRecorder struct {
	testing.TB
	mu      sync.Mutex
	msgs    []string
	fataled bool
}

func (r *fatalRecorder) Helper() {}
func (r *fatalRecorder) Errorf(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, a...))
}
func (r *fatalRecorder) Fatalf(format string, a ...any) {
	r.Errorf(format, a...)
	r.mu.Lock()
	r.fataled = true
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *fatalRecorder) Fatal(a ...any) { r.Fatalf("%s", fmt.Sprint(a...)) }

// recorded runs fn with a fatalRecorder in a goroutine of its own and returns the recorder once
// fn returns or fails; the real test fails if fn has not returned within limit.
func recorded(t *testing.T, limit time.Duration, fn func(tb testing.TB)) *fatalRecorder {
	t.Helper()
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); fn(r) }()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("the kit did not return within %s", limit)
	}
	return r
}

type family struct {
	ID string `json:"id"`
}

// A child that takes a moment of real time before it sleeps an hour: its parent, which calls it,
// is suspended well before the child's timer is armed.
var slowNapper = jobs.MustDefine("drive-slow-napper", func(in family) string { return in.ID }, jobs.NoTenant[family](),
	func(c *jobs.Ctx, in family) (string, error) {
		if _, err := jobs.Step(c, "prepare", func(context.Context) (int, error) {
			time.Sleep(200 * time.Millisecond)
			return 1, nil
		}); err != nil {
			return "", err
		}
		if err := jobs.Sleep(c, "nap", time.Hour); err != nil {
			return "", err
		}
		return "child-" + in.ID, nil
	})

var callsSlowNapper = jobs.MustDefine("drive-calls-slow-napper", func(in family) string { return in.ID }, jobs.NoTenant[family](),
	func(c *jobs.Ctx, in family) (string, error) {
		return slowNapper.Call(c, "kid", in)
	})

// RunToCompletion on a run waiting for a child it called, before the child armed its sleep's
// timer: the child is running, so RunToCompletion waits for it, then jumps the child's hour, and
// the parent completes with the child's result.
func TestRunToCompletionWaitsForAChildToArmItsTimer(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, o jobstest.Options) {
		env := jobstest.New(t, o, callsSlowNapper, slowNapper)
		run := jobstest.Enqueue(env, callsSlowNapper, family{ID: "f1"})
		if r := env.RunToCompletion(run); r.State != store.StateCompleted {
			t.Fatalf("run is %s (%s %s), want completed", r.State, r.ErrorCode, r.Error)
		}
		if got := jobstest.Result(env, callsSlowNapper, run); got != "child-f1" {
			t.Fatalf("result %q, want child-f1", got)
		}
		if want := jobstest.Epoch.Add(time.Hour); env.Clock.Now().Before(want) {
			t.Errorf("clock at %s, want at least %s (the child's nap)", env.Clock.Now(), want)
		}
	})
}

// RunToCompletion still fails a run nothing will wake: its child is blocked (its step name drifts
// on replay), nothing is ready or running, and no timer is armed.
func TestRunToCompletionFailsWhenNothingWillWakeTheRun(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	drifting := jobs.MustDefine("drive-drifting-child", func(in family) string { return in.ID }, jobs.NoTenant[family](),
		func(c *jobs.Ctx, in family) (string, error) {
			mu.Lock()
			calls++
			name := fmt.Sprintf("fetch-%d", calls) // differs at every run of the body
			mu.Unlock()
			if _, err := jobs.Step(c, name, func(context.Context) (int, error) { return 1, nil }); err != nil {
				return "", err
			}
			if err := jobs.Sleep(c, "nap", time.Hour); err != nil {
				return "", err
			}
			return "done", nil
		})
	parent := jobs.MustDefine("drive-calls-drifting", func(in family) string { return in.ID }, jobs.NoTenant[family](),
		func(c *jobs.Ctx, in family) (string, error) {
			return drifting.Call(c, "kid", in)
		})
	start := time.Now()
	rec := recorded(t, 30*time.Second, func(tb testing.TB) {
		env := jobstest.New(tb, jobstest.Options{}, parent, drifting)
		env.RunToCompletion(jobstest.Enqueue(env, parent, family{ID: "f2"}))
	})
	if !rec.fataled || len(rec.msgs) != 1 || !strings.Contains(rec.msgs[0], "nothing will wake it") {
		t.Fatalf("RunToCompletion reported %q (fatal %v), want one fatal: nothing will wake it", rec.msgs, rec.fataled)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("RunToCompletion took %s to see that nothing will wake the run", took)
	}
}

type tenantOrder struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
}

// A worker's LimitConfig.PerTenant hands a run back with a backoff of the fake clock that doubles
// from 250 ms while its tenant stays at the cap: Await moves the clock through every hand-back,
// the fourth (2 s) as the first, and the runs complete, with the clock moved by seconds, not
// hours.
//
// b is enqueued once a's body runs, not once the store says a is running: the worker gives a
// claim its tenant's place when the claim reaches it, after the store's row already says running,
// and a b claimed in between took the place first and ran at once, never handed back.
func TestAwaitHonoursAWorkerTenantBackoff(t *testing.T) {
	t.Parallel()
	var env *jobstest.Env
	const handBacks = 4 // 250 ms, 500 ms, 1 s, 2 s
	aRuns := make(chan struct{})
	var aRan sync.Once
	held := jobs.MustDefine("drive-tenant-held", func(in tenantOrder) string { return in.ID },
		jobs.TenantFrom(func(in tenantOrder) string { return in.Tenant }),
		func(c *jobs.Ctx, in tenantOrder) (string, error) {
			return jobs.Step(c, "work", func(context.Context) (string, error) {
				if in.ID == "a" { // holds the tenant's one place until b was handed back enough
					aRan.Do(func() { close(aRuns) })
					deadline := time.Now().Add(15 * time.Second)
					for env.Worker.HandedBack(jobs.DefaultQueue, worker.HandBackTenant) < handBacks && time.Now().Before(deadline) {
						time.Sleep(time.Millisecond)
					}
				}
				return "done-" + in.ID, nil
			})
		})
	env = jobstest.New(t, jobstest.Options{Worker: worker.Config{Limits: worker.LimitConfig{PerTenant: 1}}}, held)
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
	if got := jobstest.Result(env, held, a); got != "done-a" {
		t.Fatalf("a: %q", got)
	}
	if n := env.Worker.HandedBack(jobs.DefaultQueue, worker.HandBackTenant); n < handBacks {
		t.Errorf("b was handed back %v times, want at least %d", n, handBacks)
	}
	if moved := env.Clock.Now().Sub(jobstest.Epoch); moved > time.Minute {
		t.Errorf("the clock moved %s for hand-backs of seconds", moved)
	}
}
