package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// codeLedgerBusy is an app's code classified Retryable: its attempts take the backoff schedule,
// whatever retry-after the error names.
const codeLedgerBusy jobs.Code = "X_LEDGER_BUSY"

var _ = jobs.RegisterErrorRetry(map[jobs.Code]jobs.RetryClass{codeLedgerBusy: jobs.Retryable})

// peakCounter counts the bodies running at once and keeps the highest count seen.
type peakCounter struct{ running, peak atomic.Int32 }

func (p *peakCounter) enter() {
	n := p.running.Add(1)
	for old := p.peak.Load(); n > old && !p.peak.CompareAndSwap(old, n); old = p.peak.Load() {
	}
}

func (p *peakCounter) leave() { p.running.Add(-1) }

// A fleet cap (Concurrency) and a keyed cap (ConcurrencyBy) hold for as long as the run holding
// the slot runs, not for one lease: the slot is renewed with the lease. A run that outlives
// several leases, beside a second run of the same job (or key) claimed again and again by two
// workers with room to spare, never shares the cap. Were the slot left to lapse with the lease it
// was taken for, the second run would start beside the first, over the cap a user declared to
// protect a downstream system.
func TestCapsHoldPastTheLease(t *testing.T) {
	t.Parallel()
	const lease, hold = 500 * time.Millisecond, 1600 * time.Millisecond // over three leases
	testenv.EachBackend(t, testenv.Options{Clock: clock.Real{}, Lease: lease}, func(t *testing.T, env *testenv.Env) {
		t.Parallel()
		var fleet, keyed peakCounter
		entered := make(chan struct{}, 2)
		// N=1 runs for hold (unless its claim is lost); any other N returns at once.
		body := func(p *peakCounter) func(*jobs.Ctx, syncInput) (int, error) {
			return func(c *jobs.Ctx, in syncInput) (int, error) {
				p.enter()
				defer p.leave()
				if in.N == 1 {
					select {
					case entered <- struct{}{}:
					default:
					}
					select {
					case <-c.Done():
					case <-time.After(hold):
					}
				}
				return in.N, nil
			}
		}
		key := func(in syncInput) string { return in.Customer + "-" + fmt.Sprint(in.N) }
		capped := jobs.MustDefine("long-capped", key, jobs.NoTenant[syncInput](), body(&fleet), jobs.Concurrency(1))
		byKey := jobs.MustDefine("long-keyed", key, jobs.NoTenant[syncInput](), body(&keyed),
			jobs.ConcurrencyBy(jobs.ByInput("customer"), 1))
		env.Worker(worker.Config{Concurrency: 2}, capped, byKey)
		env.Worker(worker.Config{Concurrency: 2}, capped, byKey)

		a1 := enqueue(t, env, capped, syncInput{Customer: "a", N: 1})
		k1 := enqueue(t, env, byKey, syncInput{Customer: "a", N: 1})
		for range 2 {
			select {
			case <-entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the long runs never started")
			}
		}
		a2 := enqueue(t, env, capped, syncInput{Customer: "a", N: 2})
		k2 := enqueue(t, env, byKey, syncInput{Customer: "a", N: 2})
		for _, id := range []string{a1, k1, a2, k2} {
			env.Await(id, store.StateCompleted)
		}
		if p := fleet.peak.Load(); p != 1 {
			t.Errorf("Concurrency(1): %d runs at once", p)
		}
		if p := keyed.peak.Load(); p != 1 {
			t.Errorf("ConcurrencyBy(customer, 1): %d runs of customer a at once", p)
		}
		// The second runs were claimed while the first ran, and handed back: the caps were tested.
		if handedBack(t, env, "job_cap") < 1 || handedBack(t, env, "key_cap") < 1 {
			t.Errorf("hand-backs: job_cap %v, key_cap %v; want the second runs refused while the first ran",
				handedBack(t, env, "job_cap"), handedBack(t, env, "key_cap"))
		}
	})
}

// A run whose fleet slot is lost (it lapsed and another holder took it) is stopped with
// X_JOB_SLOT_LOST at its next renewal: running on would put the job over its cap. The slot is
// taken away through the store, as a lapse and another worker's claim would.
func TestALostSlotAbortsItsRun(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		t.Parallel()
		cause := make(chan error, 1)
		entered := make(chan string, 1)
		var calls atomic.Int32
		j := jobs.MustDefine("slot-holder", func(int) string { return "k" }, jobs.NoTenant[int](),
			func(c *jobs.Ctx, in int) (int, error) {
				if calls.Add(1) == 1 {
					entered <- c.Run().RunID
					<-c.Done()
					cause <- context.Cause(c)
				}
				return in, nil
			}, jobs.Concurrency(1))
		// Renewals every 20ms of real time; the fake clock stands still, so the lease never
		// lapses and only the slot can be lost.
		logs := &testenv.LogBuffer{}
		env.Worker(worker.Config{HeartbeatInterval: 20 * time.Millisecond, Logger: logs.Logger()}, j)
		id := enqueue(t, env, j, 1)
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the run never started")
		}
		ctx, slot := context.Background(), frontend.SlotKey(j.Name())
		// Released and taken in two calls: a renewal landing between them takes the free slot
		// back for the run (as a renewal of a lapsed slot does), so the pair is tried again.
		taken := false
		for try := 0; try < 50 && !taken; try++ {
			if err := env.Store.SlotRelease(ctx, slot, id); err != nil {
				t.Fatal(err)
			}
			now := env.Clock.Now()
			ok, err := env.Store.SlotAcquire(ctx, store.SlotParams{Key: slot, Limit: 1, Holder: "another-run",
				Now: now, Until: now.Add(time.Hour)})
			if err != nil {
				t.Fatalf("taking the slot: %v", err)
			}
			taken = ok
		}
		if !taken {
			t.Fatal("the run's renewals took the slot back 50 times in a row")
		}
		select {
		case err := <-cause:
			if !jobs.HasCode(err, jobs.CodeJobSlotLost) {
				t.Fatalf("the run was stopped by %v, want X_JOB_SLOT_LOST", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the run kept running without its slot")
		}
		waitLog(t, logs, "jobs.worker.slot-lost")
	})
}

// Suspension is control flow: a run that sleeps and waits for an event is on attempt 1 throughout
// and after, and a failure after both is attempt 1 of the policy's three, with two left. Were a
// wake-up counted as an attempt, a run with a few waits would be dead-lettered without ever
// failing. The sleep holds the run until its wake time, not before.
func TestSuspensionSpendsNoAttempt(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		t.Parallel()
		var charges atomic.Int32
		j := jobs.MustDefine("nap-then-wait", func(in string) string { return in }, jobs.NoTenant[string](),
			func(c *jobs.Ctx, in string) (int, error) {
				if err := jobs.Sleep(c, "nap", time.Hour); err != nil {
					return 0, err
				}
				if _, _, err := jobs.WaitForEvent[map[string]string](c, "go", "go.ahead", jobs.Match{"id": in}, 24*time.Hour); err != nil {
					return 0, err
				}
				return jobs.Step(c, "charge", func(context.Context) (int, error) {
					if charges.Add(1) == 1 {
						return 0, errors.New("gateway reset")
					}
					return 1, nil
				})
			}, jobs.Retry(jobs.RetryPolicy{Attempts: 3, Backoff: jobs.Fixed, Delay: time.Minute}))
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, "r1")
		attempt := func(when string, want int) {
			t.Helper()
			run, err := env.Engine.GetRun(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if run.Attempt != want {
				t.Fatalf("%s: attempt %d, want %d; history %v", when, run.Attempt, want, testenv.Kinds(env.History(id)))
			}
		}

		env.Await(id, store.StateSuspended)
		attempt("asleep", 1)
		env.Advance(time.Hour - time.Second)
		if run := env.Await(id, store.StateSuspended); countKind(env, id, "TimerFired:nap") != 0 {
			t.Fatalf("the sleep ended a second early: %s, history %v", run.State, testenv.Kinds(env.History(id)))
		}
		env.Advance(time.Second)
		for deadline := time.Now().Add(20 * time.Second); countKind(env, id, "EventWaitStarted:go") == 0; time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the run never reached its event wait; history %v", testenv.Kinds(env.History(id)))
			}
		}
		env.Await(id, store.StateSuspended)
		attempt("waiting for the event", 1)
		if _, err := env.Engine.Publish(context.Background(), "go.ahead", map[string]string{"id": "r1"}); err != nil {
			t.Fatal(err)
		}
		failed := awaitAttempt(t, env, id, 1)
		if failed.Attempt != 1 || failed.Stop != "" {
			t.Fatalf("the failure after a sleep and a wait: attempt %d stop %q, want attempt 1 of 3, retried", failed.Attempt, failed.Stop)
		}
		attempt("retrying", 2)
		env.Advance(time.Minute)
		if run := env.Await(id, store.StateCompleted); run.Attempt != 2 || charges.Load() != 2 {
			t.Fatalf("completed on attempt %d after %d charges, want 2 and 2", run.Attempt, charges.Load())
		}
	})
}

// eventPoll bounds how long a run waiting for an event stays parked in a worker's memory (a
// goroutine and its stack per run; an event may take days): past it, on the worker's clock, the
// body is unwound. The wait itself is durable: the event still completes the run, by a replay.
func TestEventPollUnparksAWaitingRun(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	var bodies atomic.Int32
	j := jobs.MustDefine("await-approval", func(in string) string { return in }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, in string) (string, error) {
			bodies.Add(1)
			p, ok, err := jobs.WaitForEvent[map[string]string](c, "approval", "approved", jobs.Match{"id": in}, 7*24*time.Hour)
			if err != nil || !ok {
				return "", err
			}
			return p["by"], nil
		}, jobs.EventPoll(10*time.Second))
	w := env.Worker(worker.Config{}, j)
	id := enqueue(t, env, j, "po-1")
	env.Await(id, store.StateSuspended)
	testenv.AwaitParked(t, w, 1)
	env.Fake().Advance(5 * time.Second)
	time.Sleep(50 * time.Millisecond)
	if w.Parked() != 1 {
		t.Fatal("the waiting run was unparked before its eventPoll passed")
	}
	// The bound's timer is set just after the park shows: advance until it has passed, by
	// steps, so a timer set after one step still sees the next.
	moved := 5 * time.Second
	for deadline := time.Now().Add(10 * time.Second); w.Parked() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the waiting run is still parked %s after it parked, its eventPoll 10s", moved)
		}
		env.Fake().Advance(6 * time.Second)
		moved += 6 * time.Second
		for until := time.Now().Add(200 * time.Millisecond); w.Parked() != 0 && time.Now().Before(until); {
			time.Sleep(2 * time.Millisecond)
		}
	}
	if _, err := env.Engine.Publish(context.Background(), "approved", map[string]string{"id": "po-1", "by": "ops"}); err != nil {
		t.Fatal(err)
	}
	run := env.Await(id, store.StateCompleted)
	if by, err := j.Result(run.Result); err != nil || by != "ops" || bodies.Load() != 2 {
		t.Fatalf("result %q %v after %d body starts; want ops, the second start a replay", by, err, bodies.Load())
	}
}

// A code registered Retryable takes the policy's backoff: the waits between attempts are its
// Schedule(), whatever retry-after the error carries (only a RetryAfter code honours that), and
// it never stops the run early as a terminal code does.
func TestRetryableCodeTakesTheBackoffSchedule(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		t.Parallel()
		busy := &jobs.Error{Code: codeLedgerBusy, Message: "ledger busy", RetryAfter: time.Hour}
		policy := jobs.RetryPolicy{Attempts: 4, Backoff: jobs.Exponential, Delay: 2 * time.Second}
		j, calls := failing("ledger-post", policy, busy, busy, busy)
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, 1)
		var waits []time.Duration
		for n := 1; n <= 3; n++ {
			a := awaitAttempt(t, env, id, n)
			if a.Code != string(codeLedgerBusy) || a.Stop != "" {
				t.Fatalf("attempt %d: code %s stop %q", n, a.Code, a.Stop)
			}
			wait := a.RetryAt.Sub(env.Clock.Now())
			waits = append(waits, wait)
			env.Advance(wait)
		}
		run := env.Await(id, store.StateCompleted)
		if want := policy.Schedule(); fmt.Sprint(waits) != fmt.Sprint(want) {
			t.Fatalf("waits %v, want the policy's schedule %v", waits, want)
		}
		if run.Attempt != 4 || calls.Load() != 4 {
			t.Fatalf("completed on attempt %d after %d calls, want 4", run.Attempt, calls.Load())
		}
	})
}

// Every failed attempt is logged as jobs.attempt.failed with its stop reason: "terminal", or
// "attempts-exhausted", or empty for an attempt that will be retried. An on-call engineer reading
// the logs learns there why a run was dead-lettered, without opening its history.
func TestAttemptFailedLogCarriesTheStopReason(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	terminal, _ := failing("log-terminal", jobs.RetryPolicy{Attempts: 5}, jobs.Errorf(codeInvoiceRejected, "card declined"))
	exhausted, _ := failing("log-exhausted", jobs.RetryPolicy{Attempts: 1}, errors.New("boom"))
	retried, _ := failing("log-retried", jobs.RetryPolicy{Attempts: 2, Delay: time.Minute}, errors.New("blip"))
	logs := &testenv.LogBuffer{}
	env.Worker(worker.Config{Logger: logs.Logger()}, terminal, exhausted, retried)
	ids := map[string]string{
		"terminal":           enqueue(t, env, terminal, 1),
		"attempts-exhausted": enqueue(t, env, exhausted, 1),
		"":                   enqueue(t, env, retried, 1),
	}
	env.Await(ids["terminal"], store.StateFailed)
	env.Await(ids["attempts-exhausted"], store.StateFailed)
	awaitAttempt(t, env, ids[""], 1)
	for stop, id := range ids {
		var line string
		for l := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(l, "msg=jobs.attempt.failed") && strings.Contains(l, "run="+id) {
				line = l
			}
		}
		want := "stop=" + stop
		if stop == "" {
			want = `stop=""`
		}
		if !strings.Contains(line, want+" ") {
			t.Errorf("run %s: jobs.attempt.failed line %q lacks %s", id, line, want)
		}
	}
	if a := attempts(t, env, ids["terminal"]); len(a) != 1 || a[0].Stop != history.StopTerminal {
		t.Fatalf("terminal run's attempts %+v", a)
	}
}
