package jobs_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// codeFarBusy names a retry two centuries away.
const codeFarBusy jobs.Code = "X_TEST_FAR_BUSY"

var _ = jobs.RegisterErrorRetry(map[jobs.Code]jobs.RetryClass{codeFarBusy: jobs.RetryAfter})

const twoCenturies = 200 * 365 * 24 * time.Hour

// No decision waits past the engine's bound on wake times, whatever the policy or the error
// names: a retry the engine refused was never recorded, and the run looped.
func TestDecideNeverWaitsPastTheWakeHorizon(t *testing.T) {
	t.Parallel()
	far := &jobs.Error{Code: codeFarBusy, Message: "come back later", RetryAfter: twoCenturies}
	for _, c := range []struct {
		name string
		p    jobs.RetryPolicy
		err  error
	}{
		{"retry-after", jobs.RetryPolicy{Attempts: 3}, far},
		{"retry-after under a larger maxDelay", jobs.RetryPolicy{Attempts: 3, MaxDelay: math.MaxInt64}, far},
		{"fixed delay", jobs.RetryPolicy{Attempts: 3, Backoff: jobs.Fixed, Delay: twoCenturies}, errors.New("boom")},
		{"exponential delay", jobs.RetryPolicy{Attempts: 3, Delay: twoCenturies}, errors.New("boom")},
		{"delay of MaxInt64 with jitter", jobs.RetryPolicy{Attempts: 3, Delay: math.MaxInt64, Jitter: true}, errors.New("boom")},
	} {
		for attempt := 1; attempt <= 2; attempt++ {
			d := c.p.Decide(attempt, c.err)
			if d.Stop != "" || d.RetryIn <= 0 || d.RetryIn > jobs.WakeHorizon-24*time.Hour {
				t.Errorf("%s, attempt %d: %+v; want a retry within a day short of the wake horizon", c.name, attempt, d)
			}
			if !c.p.Jitter && d.RetryIn < jobs.WakeHorizon-48*time.Hour {
				t.Errorf("%s, attempt %d: waits %s; want it clamped, not dropped", c.name, attempt, d.RetryIn)
			}
		}
		for _, d := range c.p.Schedule() {
			if d > jobs.WakeHorizon {
				t.Errorf("%s: the schedule lists %s", c.name, d)
			}
		}
	}
}

// A retry two centuries away waits, delayed, for the clamped time with its attempt counted; it
// used to be refused by the engine with X_BAD_REQUEST, leaving the attempt to lapse and be
// handed back unspent, forever.
func TestRetryBeyondTheWakeHorizonWaitsDelayed(t *testing.T) {
	t.Parallel()
	for name, fail := range map[string]struct {
		err error
		p   jobs.RetryPolicy
	}{
		"retry-after": {&jobs.Error{Code: codeFarBusy, Message: "busy", RetryAfter: twoCenturies}, jobs.RetryPolicy{Attempts: 3}},
		"policy":      {errors.New("boom"), jobs.RetryPolicy{Attempts: 3, Backoff: jobs.Fixed, Delay: twoCenturies}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t, testenv.Options{Store: memory.New()})
			j, calls := failing("far", fail.p, fail.err)
			env.Worker(worker.Config{}, j)
			id := enqueue(t, env, j, 1)
			a := awaitAttempt(t, env, id, 1)
			run := env.Await(id, store.StateDelayed)
			if wait := a.RetryAt.Sub(env.Clock.Now()); a.Stop != "" || wait > jobs.WakeHorizon || wait < jobs.WakeHorizon-48*time.Hour {
				t.Fatalf("the failure retries in %s (stop %q); want it clamped to the wake horizon", wait, a.Stop)
			}
			if run.Attempt != 2 || calls.Load() != 1 {
				t.Fatalf("attempt %d after %d calls; want the failed attempt counted, and no other", run.Attempt, calls.Load())
			}
		})
	}
}

// A sleep of d <= 0 is already due: it wakes at once, however far below zero d is. Below -24h
// it used to be a wake time the engine refuses (X_BAD_REQUEST), failing the run terminally.
func TestNonPositiveSleepIsDue(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, -time.Second, -48 * time.Hour, math.MinInt64} {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t, testenv.Options{Store: memory.New()})
			j := jobs.MustDefine("nap", func(int) string { return "k" }, jobs.NoTenant[int](),
				func(c *jobs.Ctx, _ int) (string, error) {
					if err := jobs.Sleep(c, "nap", d); err != nil {
						return "", err
					}
					return "up", nil
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
			env.Worker(worker.Config{}, j)
			now := env.Clock.Now()
			id := enqueue(t, env, j, 1)
			run := env.Await(id, store.StateCompleted, store.StateFailed)
			if run.State != store.StateCompleted {
				t.Fatalf("%s: %s %s", run.State, run.ErrorCode, run.Error)
			}
			for _, ev := range env.History(id) {
				if ev.Kind == history.KindTimerStarted {
					p, _ := ev.Decode()
					if wake := p.(history.TimerStarted).WakeAt; !wake.Equal(now) {
						t.Fatalf("wakes at %s, want now (%s)", wake, now)
					}
				}
			}
		})
	}
}
