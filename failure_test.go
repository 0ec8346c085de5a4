package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// An app's own codes, classified beside their declaration, as the registry asks.
const (
	codeInvoiceRejected jobs.Code = "X_INVOICE_REJECTED"
	codeGatewayBusy     jobs.Code = "X_GATEWAY_BUSY"
)

var _ = jobs.RegisterErrorRetry(map[jobs.Code]jobs.RetryClass{
	codeInvoiceRejected: jobs.Terminal,
	codeGatewayBusy:     jobs.RetryAfter,
})

// failing defines a job that fails with errs[attempt-1] (nil: succeeds).
func failing(name string, policy jobs.RetryPolicy, errs ...error) (*jobs.Job[int, int], *atomic.Int32) {
	var calls atomic.Int32
	j := jobs.MustDefine(name, func(int) string { return "k" }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, in int) (int, error) {
			return jobs.Step(c, "call", func(context.Context) (int, error) {
				n := int(calls.Add(1))
				if n <= len(errs) && errs[n-1] != nil {
					return 0, errs[n-1]
				}
				return n, nil
			})
		}, jobs.Retry(policy))
	return j, &calls
}

func attempts(t *testing.T, env *testenv.Env, id string) []history.AttemptFailed {
	var out []history.AttemptFailed
	for _, ev := range env.History(id) {
		if ev.Kind == history.KindAttemptFailed {
			p, err := ev.Decode()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, p.(history.AttemptFailed))
		}
	}
	return out
}

func TestRetrySchedulePrints(t *testing.T) {
	p := jobs.RetryPolicy{Attempts: 5, Backoff: jobs.Exponential, Delay: time.Second}
	if got := fmt.Sprint(p.Schedule()); got != "[1s 2s 4s 8s]" {
		t.Fatalf("schedule %s", got)
	}
	if got := p.String(); got != "5 attempts, exponential, 1s → 1s, 2s, 4s, 8s" {
		t.Fatalf("string %q", got)
	}
	fixed := jobs.RetryPolicy{Attempts: 3, Backoff: jobs.Fixed, Delay: 5 * time.Second}
	if got := fmt.Sprint(fixed.Schedule()); got != "[5s 5s]" {
		t.Fatalf("fixed %s", got)
	}
	capped := jobs.RetryPolicy{Attempts: 6, Delay: time.Second, MaxDelay: 5 * time.Second}
	if got := fmt.Sprint(capped.Schedule()); got != "[1s 2s 4s 5s 5s]" {
		t.Fatalf("capped %s", got)
	}
}

func TestTerminalErrorDeadLettersOnTheAttemptItHappened(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		j, calls := failing("invoice", jobs.RetryPolicy{Attempts: 5},
			jobs.Errorf(codeInvoiceRejected, "card declined"))
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, 1)
		run := env.Await(id, store.StateFailed)
		if calls.Load() != 1 || run.Attempt != 1 || run.StopReason != history.StopTerminal {
			t.Fatalf("calls=%d attempt=%d stop=%q; want one terminal attempt", calls.Load(), run.Attempt, run.StopReason)
		}
		if !strings.Contains(run.Error, "attempt 1 of 5") || run.ErrorCode != string(codeInvoiceRejected) {
			t.Fatalf("the last error must say why it stopped at attempt 1 of 5: %s %q", run.ErrorCode, run.Error)
		}
		a := attempts(t, env, id)
		if len(a) != 1 || a[0].Stop != history.StopTerminal {
			t.Fatalf("history attempts %+v", a)
		}
		view, err := env.Engine.InspectRun(context.Background(), id)
		if err != nil || view.StopReason != "terminal" || len(view.Attempts) != 1 {
			t.Fatalf("inspect: %+v %v", view.RunSummary, err)
		}
		dead, err := env.Engine.InspectDeadLetters(context.Background(), store.ListParams{})
		if err != nil || len(dead) != 1 || dead[0].ID != id {
			t.Fatalf("dead letters %+v %v", dead, err)
		}
	})
}

func TestRetryAfterIsHonouredAndClamped(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		busy := func(d time.Duration) error {
			return &jobs.Error{Code: codeGatewayBusy, Message: "busy", RetryAfter: d}
		}
		j, _ := failing("gateway", jobs.RetryPolicy{Attempts: 5, Delay: time.Second, MaxDelay: 4 * time.Second},
			busy(3*time.Second), busy(time.Minute), jobs.Errorf(jobs.CodeOverloaded, "no retry-after named"), errors.New("plain"))
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, 1)
		var got []time.Duration
		for n := 1; n <= 4; n++ {
			last := awaitAttempt(t, env, id, n)
			got = append(got, last.RetryAt.Sub(env.Clock.Now()))
			env.Advance(last.RetryAt.Sub(env.Clock.Now()))
		}
		env.Await(id, store.StateCompleted)
		// 3s as named; 1m clamped to maxDelay; retry-after without a delay falls back to the
		// backoff (attempt 3: 4s); a plain error takes the backoff (attempt 4: 8s → capped 4s).
		want := []time.Duration{3 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("waits %v, want %v", got, want)
		}
	})
}

// awaitAttempt waits until the run has n failed attempts and is delayed, and returns the n-th.
func awaitAttempt(t *testing.T, env *testenv.Env, id string, n int) history.AttemptFailed {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if run := env.Await(id, store.StateDelayed, store.StateRunning, store.StateReady); run.State == store.StateDelayed {
			if a := attempts(t, env, id); len(a) == n {
				return a[n-1]
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("run %s never reached failed attempt %d", id, n)
	return history.AttemptFailed{}
}

func TestUnclassifiedErrorsExhaustAttempts(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		boom := errors.New("boom")
		j, calls := failing("flaky", jobs.RetryPolicy{Attempts: 3, Backoff: jobs.Fixed, Delay: time.Minute}, boom, boom, boom, boom)
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, 1)
		for n := 1; n <= 2; n++ {
			awaitAttempt(t, env, id, n)
			env.Advance(time.Minute)
		}
		run := env.Await(id, store.StateFailed)
		if calls.Load() != 3 || run.StopReason != history.StopAttemptsExhausted || run.Attempt != 3 {
			t.Fatalf("calls=%d stop=%q attempt=%d", calls.Load(), run.StopReason, run.Attempt)
		}
	})
}

func TestRetryFromStepKeepsEarlierStepsAndAudits(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		var a, b, c atomic.Int32
		j := jobs.MustDefine("pipeline", func(int) string { return "k" }, jobs.NoTenant[int](),
			func(ctx *jobs.Ctx, in int) (int, error) {
				jobs.Step(ctx, "a", func(context.Context) (int, error) { return int(a.Add(1)), nil })
				jobs.Step(ctx, "b", func(context.Context) (int, error) { return int(b.Add(1)), nil })
				return jobs.Step(ctx, "c", func(context.Context) (int, error) {
					if c.Add(1) == 1 {
						return 0, jobs.Errorf(codeInvoiceRejected, "rejected")
					}
					return 3, nil
				})
			})
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, 1)
		env.Await(id, store.StateFailed)
		if _, err := env.Engine.Retry(context.Background(), engine.RetryRequest{RunID: id, FromStep: "nope"}); !jobs.HasCode(err, jobs.CodeStepNotFound) {
			t.Fatalf("unknown step: %v", err)
		}
		if _, err := env.Engine.Retry(context.Background(), engine.RetryRequest{RunID: id, FromStep: "b", By: "ops@acme", Reason: "fixed the gateway"}); err != nil {
			t.Fatal(err)
		}
		env.Await(id, store.StateCompleted)
		if a.Load() != 1 || b.Load() != 2 || c.Load() != 2 {
			t.Fatalf("a=%d b=%d c=%d; want a kept, b and c re-run; history %v", a.Load(), b.Load(), c.Load(), testenv.Kinds(env.History(id)))
		}
		view, _ := env.Engine.InspectRun(context.Background(), id)
		if len(view.Retries) != 1 || view.Retries[0].By != "ops@acme" || view.Retries[0].FromStep != "b" {
			t.Fatalf("audit %+v", view.Retries)
		}
		if _, err := env.Engine.Retry(context.Background(), engine.RetryRequest{RunID: id}); !jobs.HasCode(err, jobs.CodeJobNotRetryable) {
			t.Fatalf("retry of a completed run: %v", err)
		}
	})
}

// recordingFrontend wraps the engine to observe what a worker sends.
type recordingFrontend struct {
	frontend.Frontend
	onRecord    func(frontend.RecordRequest)
	onHeartbeat func(ctx context.Context, req frontend.HeartbeatRequest) (frontend.HeartbeatResponse, error, bool)
}

func (r *recordingFrontend) Record(ctx context.Context, req frontend.RecordRequest) (frontend.RecordResponse, error) {
	if r.onRecord != nil {
		r.onRecord(req)
	}
	return r.Frontend.Record(ctx, req)
}

func (r *recordingFrontend) Heartbeat(ctx context.Context, req frontend.HeartbeatRequest) (frontend.HeartbeatResponse, error) {
	if r.onHeartbeat != nil {
		if resp, err, ok := r.onHeartbeat(ctx, req); ok {
			return resp, err
		}
	}
	return r.Frontend.Heartbeat(ctx, req)
}

func TestTimeoutCancelsBeforeFailingAndAbandonedBodyIsRefused(t *testing.T) {
	// The lease outlasts the timeout: the fake clock jumps past the deadline in one step, with no
	// heartbeat in between.
	testenv.EachBackend(t, testenv.Options{Lease: time.Hour}, func(t *testing.T, env *testenv.Env) {
		var bodyCtx atomic.Pointer[jobs.Ctx]
		entered, release := make(chan struct{}), make(chan struct{})
		var releaseOnce sync.Once
		t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
		lateErr := make(chan error, 1)
		var calls atomic.Int32
		j := jobs.MustDefine("slow", func(int) string { return "k" }, jobs.NoTenant[int](),
			func(c *jobs.Ctx, in int) (int, error) {
				if calls.Add(1) > 1 {
					return 0, nil
				}
				bodyCtx.Store(c)
				close(entered)
				<-release // ignores its context
				_, err := jobs.Step(c, "late", func(context.Context) (int, error) { return 1, nil })
				lateErr <- err
				return 1, nil
			}, jobs.Timeout(time.Minute))
		var cancelledFirst atomic.Bool
		fe := &recordingFrontend{Frontend: env.Engine, onRecord: func(r frontend.RecordRequest) {
			if r.Commands[0].Kind == frontend.CmdFail && r.Commands[0].Code == string(jobs.CodeTimeout) {
				cancelledFirst.Store(bodyCtx.Load().Err() != nil)
			}
		}}
		logs := &testenv.LogBuffer{}
		env.Worker(worker.Config{Frontend: fe, Logger: logs.Logger(), StickyRuns: -1}, j)
		id := enqueue(t, env, j, 1)
		<-entered
		env.Fake().Advance(time.Minute)
		env.Await(id, store.StateDelayed)
		if !cancelledFirst.Load() {
			t.Fatal("the attempt failed before the body's context was cancelled")
		}
		if a := attempts(t, env, id); len(a) != 1 || a[0].Code != string(jobs.CodeTimeout) {
			t.Fatalf("attempts %+v", a)
		}
		releaseOnce.Do(func() { close(release) })
		if err := <-lateErr; !jobs.HasCode(err, jobs.CodeAborted) {
			t.Fatalf("a write after the deadline: %v, want X_ABORTED", err)
		}
		waitLog(t, logs, "jobs.timeout.abandoned")
		if n := countKind(env, id, "StepCompleted:late"); n != 0 {
			t.Fatal("the abandoned body's write landed")
		}
	})
}

func waitLog(t *testing.T, logs *testenv.LogBuffer, msg string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), msg) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s logged; logs:\n%s", msg, logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestStepTimeoutCancelsTheStepThenFailsIt(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		stepCancelled := make(chan error, 1)
		entered := make(chan struct{})
		var calls atomic.Int32
		j := jobs.MustDefine("slow-step", func(int) string { return "k" }, jobs.NoTenant[int](),
			func(c *jobs.Ctx, in int) (int, error) {
				return jobs.Step(c, "fetch", func(ctx context.Context) (int, error) {
					if calls.Add(1) == 1 {
						close(entered)
						<-ctx.Done()
						stepCancelled <- context.Cause(ctx)
					}
					return 1, nil
				})
			}, jobs.StepTimeout(10*time.Second), jobs.Retry(jobs.RetryPolicy{Attempts: 2}))
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, 1)
		<-entered
		env.Fake().Advance(10 * time.Second)
		if err := <-stepCancelled; !jobs.HasCode(err, jobs.CodeStepTimeout) {
			t.Fatalf("step context cause %v", err)
		}
		env.Await(id, store.StateDelayed)
		a := attempts(t, env, id)
		if len(a) != 1 || a[0].Code != string(jobs.CodeStepTimeout) || a[0].Step != "fetch" {
			t.Fatalf("attempts %+v", a)
		}
		env.Advance(time.Second)
		env.Await(id, store.StateCompleted)
	})
}

func TestHangingHeartbeatIsCaughtAsLeaseLost(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{Clock: clock.Real{}, Lease: 300 * time.Millisecond}, func(t *testing.T, env *testenv.Env) {
		aborted := make(chan error, 1)
		var calls atomic.Int32
		j := jobs.MustDefine("long", func(int) string { return "k" }, jobs.NoTenant[int](),
			func(c *jobs.Ctx, in int) (int, error) {
				if calls.Add(1) == 1 {
					<-c.Done()
					aborted <- context.Cause(c)
				}
				return 0, nil
			})
		hang := make(chan struct{})
		defer close(hang)
		fe := &recordingFrontend{Frontend: env.Engine, onHeartbeat: func(ctx context.Context, _ frontend.HeartbeatRequest) (frontend.HeartbeatResponse, error, bool) {
			select { // a store that never answers
			case <-hang:
			case <-ctx.Done():
			}
			return frontend.HeartbeatResponse{}, ctx.Err(), true
		}}
		logs := &testenv.LogBuffer{}
		w := env.Worker(worker.Config{Frontend: fe, Logger: logs.Logger()}, j)
		enqueue(t, env, j, 1)
		if err := <-aborted; !jobs.HasCode(err, jobs.CodeJobLeaseLost) {
			t.Fatalf("cause %v, want X_JOB_LEASE_LOST", err)
		}
		waitLog(t, logs, "jobs.lease.lost")
		waitLog(t, logs, "jobs.heartbeat.failed")
		if w.LeasesLost("default") < 1 {
			t.Fatal("job_leases_lost_total not counted")
		}
	})
}

func TestNoLeaseLostOnCleanCompletion(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{Clock: clock.Real{}, Lease: 2 * time.Second}, func(t *testing.T, env *testenv.Env) {
		j := jobs.MustDefine("quick", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
			func(c *jobs.Ctx, in int) (int, error) {
				time.Sleep(15 * time.Millisecond)
				return jobs.Step(c, "s", func(context.Context) (int, error) { return in, nil })
			})
		// Renewals are slow, so many are on the wire when their run completes; the engine then
		// answers X_JOB_LEASE_LOST for the finished run, which must not be reported.
		fe := &recordingFrontend{Frontend: env.Engine, onHeartbeat: func(ctx context.Context, req frontend.HeartbeatRequest) (frontend.HeartbeatResponse, error, bool) {
			time.Sleep(40 * time.Millisecond)
			return frontend.HeartbeatResponse{}, nil, false
		}}
		logs := &testenv.LogBuffer{}
		w := env.Worker(worker.Config{Frontend: fe, Logger: logs.Logger(), HeartbeatInterval: 5 * time.Millisecond, Concurrency: 8}, j)
		ids := make([]string, 40)
		for i := range ids {
			ids[i] = enqueue(t, env, j, i)
		}
		for _, id := range ids {
			env.Await(id, store.StateCompleted)
		}
		time.Sleep(100 * time.Millisecond)
		if strings.Contains(logs.String(), "jobs.lease.lost") || w.LeasesLost("default") != 0 {
			t.Fatalf("lease lost reported for finished runs:\n%s", logs.String())
		}
	})
}

func TestCodesRegistry(t *testing.T) {
	seen := map[jobs.Code]bool{}
	for _, c := range jobs.Codes() {
		if seen[c.Code] || !strings.HasPrefix(string(c.Code), "X_") || c.Meaning == "" || c.Class == "" {
			t.Fatalf("bad registry row %+v", c)
		}
		seen[c.Code] = true
	}
	for _, c := range []jobs.Code{jobs.CodeAborted, jobs.CodeJobLeaseLost, jobs.CodeJobSlotLost, jobs.CodeJobNotCancellable,
		jobs.CodeJobConcurrencyUnenforced, jobs.CodeJobMaxAttempts, jobs.CodeStepDuplicate, jobs.CodeReplayDiverged} {
		if !seen[c] {
			t.Errorf("%s missing from the registry", c)
		}
	}
	if jobs.ClassOf(codeInvoiceRejected) != jobs.Terminal || jobs.ClassOf("X_NOBODY_CLASSIFIED_THIS") != jobs.Unclassified {
		t.Fatal("app classification not applied")
	}
}

// An error whose text holds a NUL, bytes that are not UTF-8, or a multi-byte character where the
// engine cuts a long message, fails its run as any error does, on every store. Postgres refuses
// such text outright: the failure was never recorded, and the run was claimed and run again each
// time its lease lapsed, never dead-lettered, its retry policy ignored.
func TestAnErrorWithNULOrBadBytesFailsItsRun(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("€", 6000) // 18,000 bytes: cut at 16 KiB, inside a character
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		msgs := []string{"parse \x00 failed", "bad byte \xff here", long}
		var defs []jobs.Definition
		var js []*jobs.Job[int, int]
		var counts []*atomic.Int32
		for i, msg := range msgs {
			j, calls := failing(fmt.Sprintf("badtext-%d", i), jobs.RetryPolicy{Attempts: 1}, errors.New(msg), errors.New(msg))
			defs, js, counts = append(defs, j), append(js, j), append(counts, calls)
		}
		env.Worker(worker.Config{}, defs...)
		for i, j := range js {
			calls := counts[i]
			id := enqueue(t, env, j, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			run, err := awaitState(ctx, env.Engine, id, store.StateFailed)
			cancel()
			if run.State != store.StateFailed {
				t.Fatalf("error %d: the run is %s (%v) after %d calls; want failed after 1", i, run.State, err, calls.Load())
			}
			if calls.Load() != 1 || !utf8.ValidString(run.Error) || strings.ContainsRune(run.Error, 0) {
				t.Fatalf("error %d: %d calls, stored error %q", i, calls.Load(), run.Error)
			}
		}
	})
}

// A retry from a step that only an earlier retry discarded is refused (X_STEP_NOT_FOUND): the
// step is not in the run's effective history. It was taken from the discarded part, and the
// retry then discarded what had been recorded since, re-running a step that still stood.
func TestRetryFromADiscardedStepIsRefused(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		var a, b, c, d atomic.Int32
		failB, failD := atomic.Bool{}, atomic.Bool{}
		failD.Store(true)
		j := jobs.MustDefine("four", func(int) string { return "k" }, jobs.NoTenant[int](),
			func(ctx *jobs.Ctx, in int) (int, error) {
				step := func(name string, n *atomic.Int32, fail *atomic.Bool) error {
					_, err := jobs.Step(ctx, name, func(context.Context) (int, error) {
						n.Add(1)
						if fail != nil && fail.Load() {
							return 0, jobs.Errorf(codeInvoiceRejected, "%s failed", name)
						}
						return 1, nil
					})
					return err
				}
				for _, s := range []struct {
					name string
					n    *atomic.Int32
					fail *atomic.Bool
				}{{"a", &a, nil}, {"b", &b, &failB}, {"c", &c, nil}, {"d", &d, &failD}} {
					if err := step(s.name, s.n, s.fail); err != nil {
						return 0, err
					}
				}
				return 4, nil
			}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, 1)
		env.Await(id, store.StateFailed) // a, b, c recorded; d failed
		failB.Store(true)
		if _, err := env.Engine.Retry(t.Context(), engine.RetryRequest{RunID: id, FromStep: "a"}); err != nil {
			t.Fatal(err)
		}
		env.Await(id, store.StateFailed) // a recorded again; b failed; the old b and c discarded
		if _, err := env.Engine.Retry(t.Context(), engine.RetryRequest{RunID: id, FromStep: "c"}); !jobs.HasCode(err, jobs.CodeStepNotFound) {
			t.Fatalf("retry from c, which the first retry discarded: %v; want X_STEP_NOT_FOUND", err)
		}
		failB.Store(false)
		failD.Store(false)
		if _, err := env.Engine.Retry(t.Context(), engine.RetryRequest{RunID: id}); err != nil {
			t.Fatal(err)
		}
		env.Await(id, store.StateCompleted)
		if a.Load() != 2 {
			t.Fatalf("a ran %d times; want 2 (once, then again after the retry from it)", a.Load())
		}
	})
}

// A heartbeat that answers a lease with a code of a transient failure (the engine's store failed
// on the run's slot, say) does not abort the run: its lease is not lost, and the next renewal
// tries again. The worker took any code but a cancel or a lost slot as a refusal, so one slow
// store write aborted a run whose lease was fine.
func TestATransientRenewalFailureKeepsTheRun(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	release := make(chan struct{})
	var failed atomic.Int32
	j := jobs.MustDefine("steady", func(int) string { return "k" }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, in int) (int, error) {
			select {
			case <-release:
			case <-c.Done():
				return 0, context.Cause(c)
			}
			return in, nil
		})
	fe := &recordingFrontend{Frontend: env.Engine}
	fe.onHeartbeat = func(ctx context.Context, req frontend.HeartbeatRequest) (frontend.HeartbeatResponse, error, bool) {
		if len(req.Leases) == 0 || failed.Load() >= 3 {
			return frontend.HeartbeatResponse{}, nil, false
		}
		failed.Add(1)
		codes := make([]string, len(req.Leases))
		for i := range codes {
			codes[i] = string(jobs.CodeStoreUnavailable)
		}
		return frontend.HeartbeatResponse{Codes: codes}, nil, true
	}
	env.Worker(worker.Config{Frontend: fe, HeartbeatInterval: 10 * time.Millisecond}, j)
	id := enqueue(t, env, j, 1)
	deadline := time.Now().Add(10 * time.Second)
	for failed.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no heartbeat was answered with the transient code")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	run := env.Await(id, store.StateCompleted, store.StateDelayed, store.StateFailed)
	if run.State != store.StateCompleted || run.Attempt != 1 {
		t.Fatalf("the run is %s at attempt %d (%s %s); want completed at attempt 1", run.State, run.Attempt, run.ErrorCode, run.Error)
	}
}
