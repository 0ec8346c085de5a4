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

	"go.uber.org/goleak"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newEnv(t *testing.T) *testenv.Env {
	return testenv.Start(t, testenv.Options{Store: memory.New()})
}

type orgInput struct {
	OrgID string `json:"orgId"`
}

type planChosen struct {
	OrgID string `json:"orgId"`
	Plan  string `json:"plan"`
}

type onboardResult struct {
	Plan     string `json:"plan"`
	TimedOut bool   `json:"timedOut"`
}

// onboarding is the shape every test below reuses: two steps, a three-day sleep, an event wait
// and a last step, with counters for every side effect.
type onboarding struct {
	bodies, provision, seed, welcome atomic.Int32
	job                              *jobs.Job[orgInput, onboardResult]
}

func newOnboarding(t testing.TB, opts ...jobs.Option) *onboarding {
	o := &onboarding{}
	o.job = jobs.MustDefine("onboard-org",
		func(in orgInput) string { return "onboard:" + in.OrgID },
		jobs.TenantFrom(func(in orgInput) string { return in.OrgID }),
		func(ctx *jobs.Ctx, in orgInput) (onboardResult, error) {
			o.bodies.Add(1)
			if _, err := jobs.Step(ctx, "provision", func(context.Context) (string, error) {
				o.provision.Add(1)
				return "db-" + in.OrgID, nil
			}); err != nil {
				return onboardResult{}, err
			}
			if _, err := jobs.Step(ctx, "seed", func(context.Context) (int, error) {
				o.seed.Add(1)
				return 42, nil
			}); err != nil {
				return onboardResult{}, err
			}
			if err := jobs.SleepFor(ctx, 72*time.Hour); err != nil {
				return onboardResult{}, err
			}
			plan, ok, err := jobs.WaitForEvent[planChosen](ctx, "plan", "plan.chosen", jobs.Match{"orgId": in.OrgID}, 7*24*time.Hour)
			if err != nil {
				return onboardResult{}, err
			}
			if !ok {
				return onboardResult{TimedOut: true}, nil
			}
			return jobs.Step(ctx, "welcome", func(ctx context.Context) (onboardResult, error) {
				o.welcome.Add(1)
				if a, _ := jobs.ActorFrom(ctx); a.Tenant != in.OrgID {
					return onboardResult{}, fmt.Errorf("actor tenant %q, want %q", a.Tenant, in.OrgID)
				}
				return onboardResult{Plan: plan.Plan}, nil
			})
		}, opts...)
	return o
}

func enqueue[In, Out any](t *testing.T, env *testenv.Env, j *jobs.Job[In, Out], in In) string {
	t.Helper()
	res, err := j.Enqueue(context.Background(), env.Engine, in)
	if err != nil {
		t.Fatal(err)
	}
	return res.RunID
}

func TestThreeDaySleepAndEventWaitComplete(t *testing.T) {
	for _, sticky := range []int{0, -1} {
		t.Run(fmt.Sprintf("sticky=%d", sticky), func(t *testing.T) {
			env := newEnv(t)
			o := newOnboarding(t)
			w := env.Worker(worker.Config{StickyRuns: sticky}, o.job)
			id := enqueue(t, env, o.job, orgInput{OrgID: "acme"})
			// The parked case waits for the park before waking it (testenv.AwaitParked).
			parked := func() {
				t.Helper()
				if sticky >= 0 {
					testenv.AwaitParked(t, w, 1)
				}
			}

			env.Await(id, store.StateSuspended)
			parked()
			env.Advance(72 * time.Hour)
			run := env.Await(id, store.StateSuspended)
			if run.LastSeq < 6 {
				t.Fatalf("after the sleep the run should wait for the event; history: %v", testenv.Kinds(env.History(id)))
			}
			parked()
			if _, err := env.Engine.Publish(context.Background(), "plan.chosen", planChosen{OrgID: "other", Plan: "free"}); err != nil {
				t.Fatal(err)
			}
			if _, err := env.Engine.Publish(context.Background(), "plan.chosen", planChosen{OrgID: "acme", Plan: "pro"}); err != nil {
				t.Fatal(err)
			}
			run = env.Await(id, store.StateCompleted)
			res, err := o.job.Result(run.Result)
			if err != nil || res.Plan != "pro" {
				t.Fatalf("result %+v, %v; want plan pro", res, err)
			}
			if o.provision.Load() != 1 || o.seed.Load() != 1 || o.welcome.Load() != 1 {
				t.Fatalf("each step must run once: provision=%d seed=%d welcome=%d", o.provision.Load(), o.seed.Load(), o.welcome.Load())
			}
			want := []string{"RunStarted", "StepCompleted:provision", "StepCompleted:seed",
				"TimerStarted:sleep:72h0m0s", "TimerFired:sleep:72h0m0s", "EventWaitStarted:plan",
				"EventReceived:plan", "StepCompleted:welcome", "RunCompleted"}
			if got := testenv.Kinds(env.History(id)); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("history\n got %v\nwant %v", got, want)
			}
			// Parked runs resume without replay: the body starts once. Without parking, every
			// wake-up replays it from the top.
			wantBodies := int32(1)
			if sticky < 0 {
				wantBodies = 3
			}
			if o.bodies.Load() != wantBodies {
				t.Fatalf("body started %d times, want %d", o.bodies.Load(), wantBodies)
			}
		})
	}
}

func TestWorkerKilledMidRunResumesWithoutRerunningSteps(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		var step1, step2, step3 atomic.Int32
		entered := make(chan struct{})
		release := make(chan struct{})
		lateErr := make(chan error, 1)
		j := jobs.MustDefine("three-steps", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
			func(ctx *jobs.Ctx, in int) (int, error) {
				jobs.Step(ctx, "one", func(context.Context) (int, error) { return int(step1.Add(1)), nil })
				jobs.Step(ctx, "two", func(context.Context) (int, error) { return int(step2.Add(1)), nil })
				_, err := jobs.Step(ctx, "three", func(context.Context) (int, error) {
					if step3.Add(1) == 1 {
						close(entered)
						<-release // the first worker dies here
					}
					return 3, nil
				})
				if step3.Load() == 2 && err != nil {
					lateErr <- err
				}
				return 3, err
			})
		w1 := env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, 1)
		<-entered

		// "Kill" the first worker: it stops claiming and renewing, its step is still in flight.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		_ = w1.Stop(ctx)
		cancel()
		env.Advance(31 * time.Second) // its lease lapses
		env.Worker(worker.Config{}, j)
		env.Await(id, store.StateCompleted)
		if step1.Load() != 1 || step2.Load() != 1 {
			t.Fatalf("completed steps ran again: one=%d two=%d", step1.Load(), step2.Load())
		}
		if step3.Load() != 2 {
			t.Fatalf("the step in flight ran %d times, want 2 (once per worker)", step3.Load())
		}
		close(release)
		// The first worker's late write is refused: its fence is stale.
		if err := <-lateErr; !jobs.HasCode(err, jobs.CodeJobLeaseLost) {
			t.Fatalf("late write: %v, want X_JOB_LEASE_LOST", err)
		}
		if n := countKind(env, id, "StepCompleted:three"); n != 1 {
			t.Fatalf("step three recorded %d times", n)
		}
	})
}

func countKind(env *testenv.Env, id, kind string) int {
	n := 0
	for _, k := range testenv.Kinds(env.History(id)) {
		if k == kind {
			n++
		}
	}
	return n
}

func TestEnqueueIsIdempotentWhileLive(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		o := newOnboarding(t)
		a, err := o.job.Enqueue(context.Background(), env.Engine, orgInput{OrgID: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		b, err := o.job.Enqueue(context.Background(), env.Engine, orgInput{OrgID: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		if a.Deduped || !b.Deduped || a.RunID != b.RunID {
			t.Fatalf("second enqueue: %+v after %+v; want the same run, deduped", b, a)
		}
		c, _ := o.job.Enqueue(context.Background(), env.Engine, orgInput{OrgID: "globex"})
		if c.Deduped || c.RunID == a.RunID {
			t.Fatalf("another key must start another run: %+v", c)
		}
		if _, err := env.Engine.Cancel(context.Background(), a.RunID, "test"); err != nil {
			t.Fatal(err)
		}
		d, _ := o.job.Enqueue(context.Background(), env.Engine, orgInput{OrgID: "acme"})
		if d.Deduped || d.RunID == a.RunID {
			t.Fatalf("a finished run holds no key: %+v", d)
		}
	})
}

func TestEventPublishedBeforeTheWaitStillMatches(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		j := jobs.MustDefine("await-payment", func(in string) string { return in }, jobs.NoTenant[string](),
			func(ctx *jobs.Ctx, order string) (string, error) {
				p, ok, err := jobs.WaitForEvent[map[string]any](ctx, "paid", "payment.received", jobs.Match{"order": order}, time.Hour)
				if err != nil || !ok {
					return "", fmt.Errorf("no payment: %v", err)
				}
				return fmt.Sprint(p["amount"]), nil
			})
		if _, err := env.Engine.Publish(context.Background(), "payment.received", map[string]any{"order": "o-1", "amount": 42}); err != nil {
			t.Fatal(err)
		}
		env.Fake().Advance(time.Second)
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, "o-1")
		run := env.Await(id, store.StateCompleted)
		var got string
		_ = jobs.Decode(run.Result, &got)
		if got != "42" {
			t.Fatalf("result %q, want 42", got)
		}
	})
}

func TestEventWaitTimeoutIsAnOutcome(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		o := newOnboarding(t)
		env.Worker(worker.Config{}, o.job)
		id := enqueue(t, env, o.job, orgInput{OrgID: "acme"})
		env.Await(id, store.StateSuspended)
		env.Advance(72 * time.Hour)
		env.Await(id, store.StateSuspended)
		env.Advance(7*24*time.Hour + time.Second)
		run := env.Await(id, store.StateCompleted)
		res, _ := o.job.Result(run.Result)
		if !res.TimedOut || o.welcome.Load() != 0 {
			t.Fatalf("want the timeout outcome, got %+v (welcome ran %d)", res, o.welcome.Load())
		}
	})
}

func TestDuplicateStepNameIsTerminal(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		j := jobs.MustDefine("dup", func(in int) string { return "k" }, jobs.NoTenant[int](),
			func(ctx *jobs.Ctx, in int) (int, error) {
				jobs.Step(ctx, "charge", func(context.Context) (int, error) { return 1, nil })
				// A body that swallows the error must still not get past it.
				jobs.Step(ctx, "charge", func(context.Context) (int, error) { return 2, nil })
				return 0, nil
			}, jobs.Retry(jobs.RetryPolicy{Attempts: 5}))
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, 1)
		run := env.Await(id, store.StateFailed)
		if run.ErrorCode != string(jobs.CodeStepDuplicate) || run.StopReason != "terminal" || run.Attempt != 1 {
			t.Fatalf("want a terminal X_STEP_DUPLICATE on attempt 1, got %s %s attempt %d: %s", run.ErrorCode, run.StopReason, run.Attempt, run.Error)
		}
	})
}

func TestDivergedHistoryBlocksThenRetriesAfterFix(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		var bRan atomic.Int32
		define := func(first string) *jobs.Job[int, string] {
			return jobs.MustDefine("deploy", func(in int) string { return "k" }, jobs.NoTenant[int](),
				func(ctx *jobs.Ctx, in int) (string, error) {
					jobs.Step(ctx, first, func(context.Context) (int, error) { return 1, nil })
					if err := jobs.Sleep(ctx, "nap", time.Hour); err != nil {
						return "", err
					}
					return jobs.Step(ctx, "b", func(context.Context) (string, error) { bRan.Add(1); return "done", nil })
				})
		}
		v1, broken := define("a"), define("renamed")
		w1 := env.Worker(worker.Config{StickyRuns: -1}, v1)
		id := enqueue(t, env, v1, 1)
		env.Await(id, store.StateSuspended)
		_ = w1.Stop(context.Background())

		w2 := env.Worker(worker.Config{StickyRuns: -1}, broken)
		env.Advance(time.Hour)
		run := env.Await(id, store.StateBlocked)
		if run.ErrorCode != string(jobs.CodeReplayDiverged) {
			t.Fatalf("want X_REPLAY_DIVERGED, got %s: %s", run.ErrorCode, run.Error)
		}
		for _, side := range []string{`step "a"`, `step "renamed"`} {
			if !contains(run.Error, side) {
				t.Fatalf("the message must name both sides; missing %s in %q", side, run.Error)
			}
		}
		_ = w2.Stop(context.Background())

		env.Worker(worker.Config{StickyRuns: -1}, v1) // the fixed deploy
		if _, err := env.Engine.Retry(context.Background(), engineRetry(id)); err != nil {
			t.Fatal(err)
		}
		env.Await(id, store.StateCompleted)
		if bRan.Load() != 1 {
			t.Fatalf("b ran %d times", bRan.Load())
		}
	})
}

func TestStaleFenceIsRefused(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		o := newOnboarding(t)
		id := enqueue(t, env, o.job, orgInput{OrgID: "acme"})
		ctx := context.Background()
		testenv.Declare(t, env.Engine, "w1", o.job)
		testenv.Declare(t, env.Engine, "w2", o.job)
		first, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w1", Queues: []string{"default"}, Max: 1})
		if err != nil || len(first) != 1 {
			t.Fatalf("poll: %v %v", first, err)
		}
		env.Advance(31 * time.Second) // w1's lease lapses
		second, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w2", Queues: []string{"default"}, Max: 1})
		if err != nil || len(second) != 1 || second[0].Fence <= first[0].Fence {
			t.Fatalf("re-claim: %+v %v", second, err)
		}
		step := []frontend.Command{{Kind: frontend.CmdStep, Name: "provision", Output: []byte{0xc0}}}
		_, err = env.Engine.Record(ctx, frontend.RecordRequest{RunID: id, Fence: first[0].Fence, WorkerID: "w1",
			LeaseToken: first[0].LeaseToken, Commands: step, AfterSeq: 1})
		if !jobs.HasCode(err, jobs.CodeJobLeaseLost) {
			t.Fatalf("stale fence: %v, want X_JOB_LEASE_LOST", err)
		}
		if _, err := env.Engine.Record(ctx, frontend.RecordRequest{RunID: id, Fence: second[0].Fence, WorkerID: "w2",
			LeaseToken: second[0].LeaseToken, Commands: step, AfterSeq: 1}); err != nil {
			t.Fatalf("current fence: %v", err)
		}
	})
}

func TestCancelInEveryState(t *testing.T) {
	ctx := context.Background()
	t.Run("ready and delayed", func(t *testing.T) {
		env := newEnv(t)
		o := newOnboarding(t)
		ready := enqueue(t, env, o.job, orgInput{OrgID: "a"})
		req, _ := o.job.Request(orgInput{OrgID: "b"})
		req.Delay = time.Hour
		delayed, err := env.Engine.Enqueue(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{ready, delayed.RunID} {
			if run, err := env.Engine.Cancel(ctx, id, "no longer needed"); err != nil || run.State != store.StateCancelled {
				t.Fatalf("cancel %s: %v %v", id, run.State, err)
			}
		}
		env.Worker(worker.Config{}, o.job)
		env.Advance(2 * time.Hour)
		time.Sleep(50 * time.Millisecond)
		if o.bodies.Load() != 0 {
			t.Fatal("a cancelled run was executed")
		}
	})
	t.Run("suspended", func(t *testing.T) {
		env := newEnv(t)
		o := newOnboarding(t)
		env.Worker(worker.Config{}, o.job)
		id := enqueue(t, env, o.job, orgInput{OrgID: "a"})
		env.Await(id, store.StateSuspended)
		if _, err := env.Engine.Cancel(ctx, id, "stop"); err != nil {
			t.Fatal(err)
		}
		env.Advance(73 * time.Hour)
		time.Sleep(50 * time.Millisecond)
		if run := env.Await(id, store.StateCancelled); run.LastSeq != 5 {
			t.Fatalf("nothing may follow the cancel: %v", testenv.Kinds(env.History(id)))
		}
	})
	t.Run("running", func(t *testing.T) {
		env := newEnv(t)
		started := make(chan struct{})
		late := make(chan error, 1)
		j := jobs.MustDefine("runaway", func(in int) string { return "k" }, jobs.NoTenant[int](),
			func(c *jobs.Ctx, in int) (int, error) {
				_, err := jobs.Step(c, "long", func(ctx context.Context) (int, error) {
					close(started)
					<-ctx.Done() // stops at the next heartbeat
					return 0, context.Cause(ctx)
				})
				_, lateErr := jobs.Step(c, "after", func(context.Context) (int, error) { return 1, nil })
				late <- lateErr
				return 0, err
			})
		env.Worker(worker.Config{HeartbeatInterval: 10 * time.Millisecond}, j)
		id := enqueue(t, env, j, 1)
		<-started
		if run, err := env.Engine.Cancel(ctx, id, "runaway"); err != nil || run.State != store.StateCancelled {
			t.Fatalf("cancel: %v %v", run.State, err)
		}
		if err := <-late; !jobs.HasCode(err, jobs.CodeAborted) {
			t.Fatalf("a write after the cancel: %v, want X_ABORTED", err)
		}
		time.Sleep(30 * time.Millisecond)
		if run := env.Await(id, store.StateCancelled); run.LastSeq != 2 {
			t.Fatalf("the cancelled worker wrote: %v", testenv.Kinds(env.History(id)))
		}
	})
	t.Run("finished", func(t *testing.T) {
		env := newEnv(t)
		j := jobs.MustDefine("quick", func(in int) string { return "k" }, jobs.NoTenant[int](),
			func(c *jobs.Ctx, in int) (int, error) { return in, nil })
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, 7)
		env.Await(id, store.StateCompleted)
		if _, err := env.Engine.Cancel(ctx, id, "late"); !jobs.HasCode(err, jobs.CodeJobNotCancellable) {
			t.Fatalf("cancel of a completed run: %v", err)
		}
	})
}

func TestThousandConcurrentRuns(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		var steps atomic.Int64
		j := jobs.MustDefine("many", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
			func(c *jobs.Ctx, in int) (int, error) {
				a, err := jobs.Step(c, "a", func(context.Context) (int, error) { steps.Add(1); return in, nil })
				if err != nil {
					return 0, err
				}
				return jobs.Step(c, "b", func(context.Context) (int, error) { steps.Add(1); return a * 2, nil })
			})
		env.Worker(worker.Config{Concurrency: 64}, j)
		env.Worker(worker.Config{Concurrency: 64}, j)
		ids := make([]string, 1000)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := j.Enqueue(context.Background(), env.Engine, i)
				if err != nil {
					t.Error(err)
					return
				}
				ids[i] = res.RunID
			}()
		}
		wg.Wait()
		// A stall fails the test, a slow machine does not: the deadline moves on while steps run.
		// (A thousand runs under -race on a loaded 2-core machine can take longer than one
		// Await's 20 s.)
		for i, id := range ids {
			var run store.Run
			last, deadline := steps.Load(), time.Now().Add(20*time.Second)
			for {
				var err error
				if run, err = env.Engine.GetRun(context.Background(), id); err != nil {
					t.Fatal(err)
				}
				if run.State == store.StateCompleted {
					break
				}
				if n := steps.Load(); n != last {
					last, deadline = n, time.Now().Add(20*time.Second)
				}
				if time.Now().After(deadline) {
					t.Fatalf("run %d: state %s, and no step ran for 20s (%d of 2000 ran)", i, run.State, last)
				}
				time.Sleep(5 * time.Millisecond)
			}
			var got int
			_ = jobs.Decode(run.Result, &got)
			if got != i*2 {
				t.Fatalf("run %d result %d", i, got)
			}
		}
		if steps.Load() != 2000 {
			t.Fatalf("%d steps ran, want 2000", steps.Load())
		}
	})
}

func TestDefinitionRefusesBadValues(t *testing.T) {
	body := func(c *jobs.Ctx, in int) (int, error) { return 0, nil }
	key := func(int) string { return "k" }
	cases := map[string]struct {
		tenant jobs.Tenant[int]
		opt    jobs.Option
		code   jobs.Code
	}{
		"zero attempts":     {jobs.NoTenant[int](), jobs.Retry(jobs.RetryPolicy{Attempts: 0}), jobs.CodeJobDefinition},
		"zero step timeout": {jobs.NoTenant[int](), jobs.StepTimeout(0), jobs.CodeJobDefinition},
		"negative timeout":  {jobs.NoTenant[int](), jobs.Timeout(-time.Second), jobs.CodeJobDefinition},
		"zero event poll":   {jobs.NoTenant[int](), jobs.EventPoll(0), jobs.CodeJobDefinition},
		"concurrency 0":     {jobs.NoTenant[int](), jobs.Concurrency(0), jobs.CodeJobDefinition},
		"zero tenant":       {jobs.Tenant[int]{}, jobs.Queue("q"), jobs.CodeJobTenantRequired},
	}
	for name, c := range cases {
		_, err := jobs.Define("bad", key, c.tenant, body, c.opt)
		var je *jobs.Error
		if !errors.As(err, &je) || je.Code != c.code {
			t.Errorf("%s: %v, want %s", name, err, c.code)
		}
	}
	if _, err := jobs.Define[int, int]("bad", nil, jobs.NoTenant[int](), body); !jobs.HasCode(err, jobs.CodeJobIdempotencyRequired) {
		t.Errorf("nil key: %v", err)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub)))
}

func TestEnqueueRefusesIdentifiersNoStoreCanHold(t *testing.T) {
	env := newEnv(t)
	for _, req := range []jobs.EnqueueRequest{
		{Job: "j", Key: "k\x00", NoTenant: true},
		{Job: "j\xff", Key: "k", NoTenant: true},
		{Job: "j", Key: "k", Tenant: strings.Repeat("t", 1001)},
		// A delay past the wake horizon, which SQLite read back as 2262 where the others kept it.
		{Job: "j", Key: "k", NoTenant: true, Delay: jobs.WakeHorizon + time.Hour},
	} {
		if _, err := env.Engine.Enqueue(context.Background(), req); !jobs.HasCode(err, jobs.CodeBadRequest) {
			t.Errorf("%q: %v, want X_BAD_REQUEST", req.Key, err)
		}
	}
	if _, err := env.Engine.Publish(context.Background(), "ev\x00", 1); !jobs.HasCode(err, jobs.CodeBadRequest) {
		t.Errorf("event name with NUL: %v", err)
	}
}
