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
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/replay"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

const codeDeclined jobs.Code = "X_CARD_DECLINED"

// memEnv is an engine on a fresh memory store.
func memEnv(t *testing.T) *testenv.Env {
	return testenv.Start(t, testenv.Options{Store: memory.New()})
}

// sleepOnce runs j (input 1) on env under a worker of the given stickiness (-1: the wake-up
// replays the body); the body is expected to sleep an hour once, then finish. It returns the
// run's id and its row once finished.
func sleepOnce[Out any](t *testing.T, env *testenv.Env, sticky int, j *jobs.Job[int, Out]) (string, store.Run) {
	t.Helper()
	w := env.Worker(worker.Config{StickyRuns: sticky}, j)
	id := enqueue(t, env, j, 1)
	r := env.Await(id, store.StateSuspended, store.StateFailed, store.StateBlocked, store.StateCompleted)
	if r.State == store.StateSuspended {
		if sticky >= 0 {
			testenv.AwaitParked(t, w, 1)
		}
		env.Advance(time.Hour)
	}
	run := env.Await(id, store.StateCompleted, store.StateFailed, store.StateBlocked)
	t.Logf("history %s", strings.Join(testenv.Kinds(env.History(id)), ","))
	return id, run
}

// A body that goes on past a failed step decided what to do next on that failure. Its replay must
// see the same failure, not run the step again: the charge below succeeds the second time, and a
// replay that ran it would take the other branch and diverge from its own history.
func TestAFailureTheBodyWentOnPastReplaysAsItHappened(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		var charges, invoices atomic.Int32
		var seen []string // the failures the body saw, live and replayed
		j := jobs.MustDefine("pay", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
			func(ctx *jobs.Ctx, in int) (string, error) {
				via := "card"
				if _, err := jobs.Step(ctx, "charge", func(context.Context) (int, error) {
					if charges.Add(1) == 1 {
						return 0, jobs.Errorf(codeDeclined, "card declined")
					}
					return 1, nil
				}); err != nil {
					seen = append(seen, fmt.Sprintf("%s|%s", jobs.CodeOf(err), err))
					if !jobs.HasCode(err, codeDeclined) {
						return "", err
					}
					via = "invoice"
					if _, err := jobs.Step(ctx, "invoice", func(context.Context) (int, error) { return int(invoices.Add(1)), nil }); err != nil {
						return "", err
					}
				}
				if err := jobs.Sleep(ctx, "settle", time.Hour); err != nil {
					return "", err
				}
				return via, nil
			})
		env.Worker(worker.Config{StickyRuns: -1}, j) // the wake-up replays the body
		id := enqueue(t, env, j, 1)
		env.Await(id, store.StateSuspended)
		env.Advance(time.Hour)
		run := env.Await(id, store.StateCompleted, store.StateBlocked, store.StateFailed)
		if run.State != store.StateCompleted {
			t.Fatalf("run %s: %s %s", run.State, run.ErrorCode, run.Error)
		}
		res, err := j.Result(run.Result)
		if err != nil || res != "invoice" || charges.Load() != 1 || invoices.Load() != 1 {
			t.Fatalf("result %q (%v), charged %d times, invoiced %d; want invoice, each once", res, err, charges.Load(), invoices.Load())
		}
		want := "X_CARD_DECLINED|X_CARD_DECLINED: card declined"
		if len(seen) != 2 || seen[0] != want || seen[1] != want {
			t.Fatalf("the body saw %q; want the same failure live and replayed, %q", seen, want)
		}
		kinds := strings.Join(testenv.Kinds(env.History(id)), ",")
		if !strings.HasPrefix(kinds, "RunStarted,StepFailed:charge,StepCompleted:invoice,TimerStarted:settle,") {
			t.Fatalf("history %s; the failure is recorded ahead of the step after it", kinds)
		}
		// The trace the CLI, the console and MCP show names the failed step and its error.
		v, err := env.Engine.InspectRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if s := v.Steps[0]; s.Kind != "step" || s.Name != "charge" || s.Status != "failed" || s.Note != "X_CARD_DECLINED: card declined" {
			t.Fatalf("the trace's first call %+v; want step charge failed, noted with its error", s)
		}
	})
}

// A retry loop in the body, with a durable sleep between tries under the same step name: every
// try is matched in order on replay, so the body counts the tries it made live.
func TestARetryLoopWithSleepsBetweenTriesReplays(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		var polls atomic.Int32
		j := jobs.MustDefine("poll-until-ready", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
			func(ctx *jobs.Ctx, in int) (int, error) {
				for try := 0; ; try++ {
					_, err := jobs.Step(ctx, "poll", func(context.Context) (int32, error) {
						if n := polls.Add(1); n < 3 {
							return 0, errors.New("not ready")
						}
						return 0, nil
					})
					if err == nil {
						return try, nil
					}
					if err.Error() != "not ready" || jobs.CodeOf(err) != "" {
						return 0, fmt.Errorf("try %d failed with %q (code %q), want the live failure's text and no code", try, err, jobs.CodeOf(err))
					}
					if err := jobs.Sleep(ctx, fmt.Sprintf("backoff-%d", try), time.Minute); err != nil {
						return 0, err
					}
				}
			})
		env.Worker(worker.Config{StickyRuns: -1}, j)
		id := enqueue(t, env, j, 1)
		for range 2 {
			env.Await(id, store.StateSuspended)
			env.Advance(time.Minute)
		}
		run := env.Await(id, store.StateCompleted, store.StateBlocked, store.StateFailed)
		if run.State != store.StateCompleted {
			t.Fatalf("run %s: %s %s", run.State, run.ErrorCode, run.Error)
		}
		tries, _ := j.Result(run.Result)
		if tries != 2 || polls.Load() != 3 {
			t.Fatalf("succeeded on try %d after %d polls; want try 2 (two failures seen) and 3 polls", tries, polls.Load())
		}
	})
}

// A failure the body returns fails the attempt and is not recorded: the retry runs the step again.
// A failure the body went on past before completing is recorded ahead of the completion, so the
// dumped history still replays against code whose step would now succeed.
func TestAReturnedFailureIsRetriedAndAHandledOneRecordedBeforeCompletion(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		var calls atomic.Int32
		flaky := func(context.Context) (int, error) {
			if calls.Add(1) == 1 {
				return 0, errors.New("flaky")
			}
			return 7, nil
		}
		returns := jobs.MustDefine("returns-it", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
			func(ctx *jobs.Ctx, in int) (int, error) { return jobs.Step(ctx, "s", flaky) },
			jobs.Retry(jobs.RetryPolicy{Attempts: 2, Delay: time.Millisecond}))
		handles := jobs.MustDefine("handles-it", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
			func(ctx *jobs.Ctx, in int) (int, error) {
				v, err := jobs.Step(ctx, "s", flaky)
				if err != nil {
					return -1, nil
				}
				return v, nil
			})
		env.Worker(worker.Config{}, returns, handles)

		id := enqueue(t, env, returns, 1)
		env.Await(id, store.StateDelayed, store.StateCompleted)
		env.Advance(time.Second)
		run := env.Await(id, store.StateCompleted, store.StateFailed)
		if v, _ := returns.Result(run.Result); run.State != store.StateCompleted || v != 7 {
			t.Fatalf("run %s result %d; want completed with 7 on the retry", run.State, v)
		}
		for _, ev := range env.History(id) {
			if ev.Kind == history.KindStepFailed {
				t.Fatalf("a failure the body returned was recorded (seq %d)", ev.Seq)
			}
		}

		calls.Store(0)
		id = enqueue(t, env, handles, 2)
		run = env.Await(id, store.StateCompleted, store.StateFailed)
		if v, _ := handles.Result(run.Result); v != -1 {
			t.Fatalf("result %d; want the fallback, -1", v)
		}
		events := env.History(id)
		if got := strings.Join(testenv.Kinds(events), ","); got != "RunStarted,StepFailed:s,RunCompleted" {
			t.Fatalf("history %s", got)
		}
		// calls is past 1: the step would succeed now. The check replays the recorded failure.
		if err := replay.Check(context.Background(), handles, events); err != nil {
			t.Fatalf("replay.Check of the completed history: %v", err)
		}
	})
}

// The engine holds a worker's failed step to the history: it never follows a call that took the
// name, it names a call a store can hold, and its texts are cleaned as an attempt's failure's are.
func TestTheEngineChecksARecordedStepFailure(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		o := newOnboarding(t)
		id := enqueue(t, env, o.job, orgInput{OrgID: "acme"})
		ctx := context.Background()
		testenv.Declare(t, env.Engine, "w1", o.job)
		tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w1", Queues: []string{"default"}, Max: 1})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("poll: %v %v", tasks, err)
		}
		seq := int64(1)
		record := func(cmds ...frontend.Command) error {
			resp, err := env.Engine.Record(ctx, frontend.RecordRequest{RunID: id, Fence: tasks[0].Fence, WorkerID: "w1",
				LeaseToken: tasks[0].LeaseToken, Commands: cmds, AfterSeq: seq})
			if err == nil {
				seq = resp.LastSeq
			}
			return err
		}
		failed := func(name string) frontend.Command {
			return frontend.Command{Kind: frontend.CmdStepFailed, Name: name, Code: "X_NOPE", Error: "X_NOPE: no"}
		}
		step := func(name string) frontend.Command {
			return frontend.Command{Kind: frontend.CmdStep, Name: name, Output: []byte{0xc0}}
		}
		// Two failed tries and the one that succeeded, under one name: accepted.
		if err := record(failed("provision"), failed("provision"), step("provision")); err != nil {
			t.Fatalf("failed tries, then the step: %v", err)
		}
		before := len(env.History(id))
		for _, c := range []struct {
			name string
			cmds []frontend.Command
			code jobs.Code
		}{
			{"a failure of a recorded step", []frontend.Command{failed("provision")}, jobs.CodeStepDuplicate},
			{"a failure after its step in one record", []frontend.Command{step("seed"), failed("seed")}, jobs.CodeStepDuplicate},
			{"a failure naming no call", []frontend.Command{failed("")}, jobs.CodeBadRequest},
			{"a failure with a name no store holds", []frontend.Command{failed("bad\x00name")}, jobs.CodeBadRequest},
		} {
			if err := record(c.cmds...); !jobs.HasCode(err, c.code) {
				t.Fatalf("%s: %v, want %s", c.name, err, c.code)
			}
		}
		if n := len(env.History(id)); n != before {
			t.Fatalf("refused records changed the history: %d events, %d before", n, before)
		}
		if err := record(frontend.Command{Kind: frontend.CmdStepFailed, Name: "seed", Code: "X_\x00BAD", Error: "a \x00 byte"}); err != nil {
			t.Fatalf("a failure with a NUL in its texts: %v, want it cleaned and kept", err)
		}
		evs := env.History(id)
		p, err := evs[len(evs)-1].Decode()
		if err != nil {
			t.Fatal(err)
		}
		if f := p.(history.StepFailed); strings.ContainsRune(f.Code+f.Error, 0) || f.StepName != "seed" {
			t.Fatalf("recorded %+v; want the texts without their NUL", f)
		}
	})
}

// A parallel step's record does not carry a failure the body has not gone on past: here the body
// returns it after its future recorded, the attempt fails, and the retry runs the step again
// (and succeeds) rather than replaying the failure on every attempt.
func TestAFutureRecordsWithoutTheFailureTheBodyReturns(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		var tries, futures atomic.Int32
		j := jobs.MustDefine("mixed", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
			func(ctx *jobs.Ctx, in int) (int, error) {
				failed := make(chan struct{})
				f := jobs.Go(ctx, "f", func(context.Context) (int, error) {
					futures.Add(1)
					<-failed // records once the step below has failed
					return 1, nil
				})
				_, err := jobs.Step(ctx, "a", func(context.Context) (int, error) {
					if tries.Add(1) == 1 {
						return 0, errors.New("once")
					}
					return 2, nil
				})
				close(failed)
				v, ferr := f.Await(ctx)
				if ferr != nil {
					return 0, ferr
				}
				if err != nil {
					return 0, err
				}
				return v, nil
			}, jobs.Retry(jobs.RetryPolicy{Attempts: 2, Delay: time.Millisecond}))
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, 1)
		env.Await(id, store.StateDelayed, store.StateCompleted, store.StateFailed)
		env.Advance(time.Second)
		run := env.Await(id, store.StateCompleted, store.StateFailed)
		if run.State != store.StateCompleted || tries.Load() != 2 || futures.Load() != 1 {
			t.Fatalf("run %s (%s), the step tried %d times, the future ran %d; want completed on the retry, 2 and 1",
				run.State, run.Error, tries.Load(), futures.Load())
		}
	})
}

// A parallel step's failure the body saw (Await) and went on past is recorded too: the replay
// settles the future with the same failure instead of running the step again. One the body never
// looked at is not, and neither is one it returned.
func TestAFutureFailureTheBodyWentOnPastReplays(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		var quotes atomic.Int32
		j := jobs.MustDefine("quote-or-default", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
			func(ctx *jobs.Ctx, in int) (int, error) {
				f := jobs.Go(ctx, "quote", func(context.Context) (int, error) {
					if quotes.Add(1) == 1 {
						return 0, jobs.Errorf("X_NO_QUOTE", "carrier down")
					}
					return 40, nil
				})
				price, err := f.Await(ctx)
				if err != nil {
					if !jobs.HasCode(err, "X_NO_QUOTE") || err.Error() != "X_NO_QUOTE: carrier down" {
						return 0, fmt.Errorf("the future failed with %q", err)
					}
					if price, err = jobs.Step(ctx, "default-price", func(context.Context) (int, error) { return 50, nil }); err != nil {
						return 0, err
					}
				}
				if err := jobs.Sleep(ctx, "settle", time.Hour); err != nil {
					return 0, err
				}
				return price, nil
			})
		env.Worker(worker.Config{StickyRuns: -1}, j)
		id := enqueue(t, env, j, 1)
		env.Await(id, store.StateSuspended)
		env.Advance(time.Hour)
		run := env.Await(id, store.StateCompleted, store.StateBlocked, store.StateFailed)
		if run.State != store.StateCompleted {
			t.Fatalf("run %s: %s %s", run.State, run.ErrorCode, run.Error)
		}
		if price, _ := j.Result(run.Result); price != 50 || quotes.Load() != 1 {
			t.Fatalf("price %d after %d quotes; want the default, 50, after one", price, quotes.Load())
		}
		if kinds := strings.Join(testenv.Kinds(env.History(id)), ","); !strings.HasPrefix(kinds, "RunStarted,StepFailed:quote,StepCompleted:default-price,TimerStarted:settle,") {
			t.Fatalf("history %s", kinds)
		}
	})
}

// An operator may re-run a dead run from a failed step the body went on past: the retry discards
// the failure and what followed it, and the step runs again.
func TestRetryFromAFailedStepTheBodyWentOnPast(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		var charges, ships atomic.Int32
		j := jobs.MustDefine("pay-and-ship", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
			func(ctx *jobs.Ctx, in int) (string, error) {
				via := "card"
				if _, err := jobs.Step(ctx, "charge", func(context.Context) (int, error) {
					if charges.Add(1) == 1 {
						return 0, jobs.Errorf(codeDeclined, "declined")
					}
					return 1, nil
				}); err != nil {
					via = "invoice"
				}
				// Recorded with the failure ahead of it.
				if _, err := jobs.Step(ctx, "label", func(context.Context) (string, error) { return via, nil }); err != nil {
					return "", err
				}
				if _, err := jobs.Step(ctx, "ship", func(context.Context) (int, error) {
					if ships.Add(1) == 1 {
						return 0, jobs.Errorf(jobs.CodeBadRequest, "no address") // terminal: dead-letters
					}
					return 1, nil
				}); err != nil {
					return "", err
				}
				return via, nil
			})
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, 1)
		env.Await(id, store.StateFailed)
		if _, err := env.Engine.Retry(context.Background(), engine.RetryRequest{RunID: id, FromStep: "charge", By: "ops", Reason: "card fixed"}); err != nil {
			t.Fatalf("retry from the failed step: %v", err)
		}
		run := env.Await(id, store.StateCompleted, store.StateFailed, store.StateBlocked)
		if via, _ := j.Result(run.Result); run.State != store.StateCompleted || via != "card" || charges.Load() != 2 {
			t.Fatalf("run %s %q via %q, charged %d times; want completed via card, the charge run again", run.State, run.Error, via, charges.Load())
		}
	})
}
