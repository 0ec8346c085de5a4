package jobstest_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/jobstest"
	"github.com/ultimat3/jobs/store"
)

type order struct {
	ID string `json:"id"`
}

type paid struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

var checkout = jobs.MustDefine("checkout", func(in order) string { return in.ID }, jobs.NoTenant[order](),
	func(ctx *jobs.Ctx, in order) (string, error) {
		if _, err := jobs.Step(ctx, "reserve", func(context.Context) (string, error) { return "r-" + in.ID, nil }); err != nil {
			return "", err
		}
		if err := jobs.Sleep(ctx, "cool-off", time.Hour); err != nil {
			return "", err
		}
		_, ok, err := jobs.WaitForEvent[paid](ctx, "payment", "order.paid", jobs.Match{"id": in.ID}, 24*time.Hour)
		if err != nil {
			return "", err
		}
		if !ok {
			return jobs.Step(ctx, "release", func(context.Context) (string, error) { return "released", nil })
		}
		return jobs.Step(ctx, "ship", func(context.Context) (string, error) { return "shipped", nil })
	})

func each(t *testing.T, f func(t *testing.T, o jobstest.Options)) {
	for name, o := range map[string]jobstest.Options{"memory": {}, "sqlite": {SQLite: true}} {
		t.Run(name, func(t *testing.T) { t.Parallel(); f(t, o) })
	}
}

// Advance and Publish drive the paid branch; the assertions read the history.
func TestPublishAndAdvance(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, o jobstest.Options) {
		env := jobstest.New(t, o, checkout)
		run := jobstest.Enqueue(env, checkout, order{ID: "o1"})
		env.AwaitSuspended(run)
		env.AssertSteps(run, "step:reserve", "sleep:cool-off")
		env.Advance(time.Hour)
		env.AwaitSuspended(run)
		env.AssertState(run, store.StateSuspended)
		env.Publish("order.paid", paid{ID: "o1", Amount: 5})
		if got := jobstest.Result(env, checkout, run); got != "shipped" {
			t.Fatalf("result %q", got)
		}
		env.AssertSteps(run, "step:reserve", "sleep:cool-off", "wait:payment", "step:ship")
		if !env.Clock.Now().Equal(jobstest.Epoch.Add(time.Hour)) {
			t.Errorf("clock at %s", env.Clock.Now())
		}
	})
}

// RunToCompletion sleeps through every timer: with no payment the wait times out.
func TestRunToCompletion(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, o jobstest.Options) {
		env := jobstest.New(t, o, checkout)
		run := jobstest.Enqueue(env, checkout, order{ID: "o2"})
		if r := env.RunToCompletion(run); r.State != store.StateCompleted {
			t.Fatalf("run is %s", r.State)
		}
		if got := jobstest.Result(env, checkout, run); got != "released" {
			t.Fatalf("result %q", got)
		}
		env.AssertSteps(run, "step:reserve", "sleep:cool-off", "wait:payment", "step:release")
		if want := jobstest.Epoch.Add(25 * time.Hour); env.Clock.Now().Before(want) {
			t.Errorf("clock at %s, want at least %s", env.Clock.Now(), want)
		}
	})
}

// The assertions fail a test that is wrong: run them against a recorder.
func TestAssertionsFail(t *testing.T) {
	t.Parallel()
	env := jobstest.New(t, jobstest.Options{}, checkout)
	run := jobstest.Enqueue(env, checkout, order{ID: "o3"})
	env.AwaitSuspended(run)
	rec := &recorder{TB: t}
	probe := *env
	probe.T = rec
	probe.AssertSteps(run, "step:other")
	probe.AssertState(run, store.StateCompleted)
	if rec.errors != 2 {
		t.Fatalf("%d assertion failures reported, want 2", rec.errors)
	}
}

type recorder struct {
	testing.TB
	errors int
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.errors++ }

// The kit replays the body at every wake-up, as a restarted worker would: a step whose name is
// not the same on replay fails the test (the run is blocked, X_REPLAY_DIVERGED) instead of passing
// it, parked in memory, and failing in production.
func TestCodeThatDoesNotReplayFailsInTheKit(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	drifting := jobs.MustDefine("drifting", func(in order) string { return in.ID }, jobs.NoTenant[order](),
		func(ctx *jobs.Ctx, in order) (string, error) {
			name := fmt.Sprintf("fetch-%d", calls.Add(1)) // differs at every run of the body
			if _, err := jobs.Step(ctx, name, func(context.Context) (int, error) { return 1, nil }); err != nil {
				return "", err
			}
			if err := jobs.Sleep(ctx, "nap", time.Hour); err != nil {
				return "", err
			}
			return "done", nil
		})
	env := jobstest.New(t, jobstest.Options{}, drifting)
	run := env.RunToCompletion(jobstest.Enqueue(env, drifting, order{ID: "d1"}))
	if run.State != store.StateBlocked || run.ErrorCode != string(jobs.CodeReplayDiverged) {
		t.Fatalf("run %s %s %q; want blocked X_REPLAY_DIVERGED", run.State, run.ErrorCode, run.Error)
	}
}

// A body's timeout longer than the engine's usual lease is testable on the fake clock: advancing
// past it fails the attempt with X_TIMEOUT, with the run held by the one worker throughout.
func TestATimeoutLongerThanTheLeaseIsTestable(t *testing.T) {
	t.Parallel()
	// The attempt's deadline is a timer on the fake clock, made as the worker starts the body:
	// the clock moves once the body runs, or a worker slow to start it would make the timer
	// after the clock had passed its time, and it would wait the whole timeout again.
	running := make(chan struct{}, 1)
	slow := jobs.MustDefine("slow", func(in order) string { return in.ID }, jobs.NoTenant[order](),
		func(ctx *jobs.Ctx, in order) (string, error) {
			return jobs.Step(ctx, "wait-forever", func(c context.Context) (string, error) {
				select {
				case running <- struct{}{}:
				default:
				}
				<-c.Done()
				return "", c.Err()
			})
		}, jobs.Timeout(5*time.Minute), jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
	env := jobstest.New(t, jobstest.Options{}, slow)
	run := jobstest.Enqueue(env, slow, order{ID: "s1"})
	select {
	case <-running:
	case <-time.After(20 * time.Second):
		t.Fatal("the body did not start")
	}
	for range 12 { // ten minutes, in half-minute hops past the engine's 30 s lease
		env.Advance(30 * time.Second)
	}
	r := env.Await(run, store.StateFailed, store.StateCompleted)
	if r.State != store.StateFailed || r.Attempt != 1 || !strings.Contains(r.Error, string(jobs.CodeTimeout)) {
		t.Fatalf("run %s at attempt %d: %s %q; want failed on its one attempt with X_TIMEOUT", r.State, r.Attempt, r.ErrorCode, r.Error)
	}
}

// A job with a fleet concurrency cap runs its queued runs in turn in the kit: the runs the engine
// hands back over the cap get their turn without the test moving the clock.
func TestACappedJobRunsInTurn(t *testing.T) {
	t.Parallel()
	capped := jobs.MustDefine("capped", func(in order) string { return in.ID }, jobs.NoTenant[order](),
		func(ctx *jobs.Ctx, in order) (string, error) {
			return jobs.Step(ctx, "work", func(context.Context) (string, error) { return "done-" + in.ID, nil })
		}, jobs.Concurrency(1))
	env := jobstest.New(t, jobstest.Options{}, capped)
	var runs []string
	for _, id := range []string{"a", "b", "c"} {
		runs = append(runs, jobstest.Enqueue(env, capped, order{ID: id}))
	}
	for i, run := range runs {
		if got := jobstest.Result(env, capped, run); got != "done-"+[]string{"a", "b", "c"}[i] {
			t.Fatalf("run %d: %q", i, got)
		}
	}
}

// A fallback is testable: Calls lists the failed step the body went on past, in its place.
func TestCallsListAFailedStepTheBodyWentOnPast(t *testing.T) {
	t.Parallel()
	pay := jobs.MustDefine("pay", func(in order) string { return in.ID }, jobs.NoTenant[order](),
		func(ctx *jobs.Ctx, in order) (string, error) {
			if _, err := jobs.Step(ctx, "charge", func(context.Context) (int, error) {
				return 0, jobs.Errorf("X_DECLINED", "declined")
			}); err == nil {
				return "card", nil
			}
			if _, err := jobs.Step(ctx, "invoice", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return "", err
			}
			return "invoice", nil
		})
	env := jobstest.New(t, jobstest.Options{}, pay)
	run := jobstest.Enqueue(env, pay, order{ID: "p1"})
	if got := jobstest.Result(env, pay, run); got != "invoice" {
		t.Fatalf("result %q", got)
	}
	env.AssertSteps(run, "step-failed:charge", "step:invoice")
}
