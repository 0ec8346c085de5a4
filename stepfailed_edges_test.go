package jobs_test

// The edges of recording failed steps (StepFailed): parallel fallbacks, panics, retry-after,
// a name tried again with jobs.Go, typed nils, texts too large or odd, unread futures, many
// failures between records, cancels and operator retries. Each test states the contract.

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/freetext"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/replay"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// edgeOverHTTP is an engine on the memory store served over HTTP, and a client of it for a
// worker to reach it through, as a remote worker does.
func edgeOverHTTP(t *testing.T) (*testenv.Env, *api.Client) {
	t.Helper()
	env := memEnv(t)
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)
	c, err := api.NewClient(ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return env, c
}

func edgeFinal(t *testing.T, env *testenv.Env, id string) store.Run {
	t.Helper()
	return env.Await(id, store.StateCompleted, store.StateBlocked, store.StateFailed)
}

// A hedged request: the fast future wins AwaitFirst, the slow one fails afterwards, unread. The
// body completes. The completed history must pass replay.Check against the very same code.
func TestStepFailedEdgeUnreadFutureFailureCheckOfCompletedHistory(t *testing.T) {
	env := memEnv(t)
	var slowRuns atomic.Int32
	j := jobs.MustDefine("edge-hedge", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			release := make(chan struct{})
			slow := jobs.Go(ctx, "slow", func(context.Context) (int, error) {
				<-release
				slowRuns.Add(1)
				return 0, errors.New("slow gateway failed")
			})
			fast := jobs.Go(ctx, "fast", func(context.Context) (int, error) { return 1, nil })
			i, err := jobs.AwaitFirst(ctx, slow, fast)
			close(release)
			if err != nil {
				return 0, err
			}
			if err := jobs.Sleep(ctx, "settle", time.Hour); err != nil {
				return 0, err
			}
			return i, nil
		})
	id, run := sleepOnce(t, env, -1, j)
	if run.State != store.StateCompleted {
		t.Fatalf("run %s: %s %s", run.State, run.ErrorCode, run.Error)
	}
	events := env.History(id)
	t.Logf("history %s; slow ran %d times", strings.Join(testenv.Kinds(events), ","), slowRuns.Load())
	if err := replay.Check(context.Background(), j, events); err != nil {
		t.Errorf("replay.Check of the completed history against unchanged code: %v", err)
	}
	if n := slowRuns.Load(); n != 1 {
		t.Errorf("the slow step's function ran %d times (once live, again at the wake-up's replay); a step runs once ever per run", n)
	}
}

// A parallel step that panics: Await returns the panic as the step's error and the body goes on
// past it to a fallback. The replay at the wake-up must see the same failure.
func TestStepFailedEdgeParallelPanicTheBodyWentOnPast(t *testing.T) {
	env := memEnv(t)
	var quotes atomic.Int32
	j := jobs.MustDefine("edge-quote-panic", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			f := jobs.Go(ctx, "quote", func(context.Context) (int, error) {
				if quotes.Add(1) == 1 {
					var m map[string]int
					m["x"] = 1 // a nil-map bug in a client library, once
				}
				return 40, nil
			})
			price, err := f.Await(ctx)
			if err != nil {
				if price, err = jobs.Step(ctx, "default-price", func(context.Context) (int, error) { return 50, nil }); err != nil {
					return 0, err
				}
			}
			if err := jobs.Sleep(ctx, "settle", time.Hour); err != nil {
				return 0, err
			}
			return price, nil
		})
	_, run := sleepOnce(t, env, -1, j)
	if run.State != store.StateCompleted {
		t.Fatalf("run %s: %s %s (quote ran %d times)", run.State, run.ErrorCode, run.Error, quotes.Load())
	}
	if price, _ := j.Result(run.Result); price != 50 || quotes.Load() != 1 {
		t.Fatalf("price %d after %d quotes; want the fallback 50 after one", price, quotes.Load())
	}
}

const codeEdgeBusy jobs.Code = "X_EDGE_BUSY"

var _ = jobs.RegisterErrorRetry(map[jobs.Code]jobs.RetryClass{codeEdgeBusy: jobs.RetryAfter})

// The docs: a replayed failure is read by the retry classes as the live one is. A RetryAfter
// code's delay is part of that.
func TestStepFailedEdgeReplayedFailureKeepsRetryAfter(t *testing.T) {
	delays := map[int]time.Duration{}
	for _, sticky := range []int{0, -1} {
		t.Run(fmt.Sprint("sticky=", sticky), func(t *testing.T) {
			env := memEnv(t)
			j := jobs.MustDefine("edge-busy", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
				func(ctx *jobs.Ctx, in int) (int, error) {
					_, err := jobs.Step(ctx, "call", func(context.Context) (int, error) {
						return 0, &jobs.Error{Code: codeEdgeBusy, Message: "busy", RetryAfter: 2 * time.Hour}
					})
					if err == nil {
						return 1, nil
					}
					// Tell someone, then give the attempt up: the queue's retry class decides.
					if err := jobs.Sleep(ctx, "cool-down", time.Minute); err != nil {
						return 0, err
					}
					return 0, err
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 3, Delay: time.Millisecond}))
			w := env.Worker(worker.Config{StickyRuns: sticky}, j)
			id := enqueue(t, env, j, 1)
			env.Await(id, store.StateSuspended)
			if sticky >= 0 {
				testenv.AwaitParked(t, w, 1)
			}
			env.Advance(time.Minute)
			env.Await(id, store.StateDelayed, store.StateFailed)
			for _, ev := range env.History(id) {
				if ev.Kind == history.KindAttemptFailed {
					p, _ := ev.Decode()
					a := p.(history.AttemptFailed)
					delays[sticky] = a.RetryAt.Sub(ev.At)
					t.Logf("attempt %d failed %s %q, retry in %s", a.Attempt, a.Code, a.Error, a.RetryAt.Sub(ev.At))
					break
				}
			}
		})
	}
	if delays[0] != delays[-1] {
		t.Fatalf("the retry after the same failure waits %s when the body was parked, %s when it was replayed", delays[0], delays[-1])
	}
}

// The name of a failed step stays free and the body may try it again under it; here the retry is
// a parallel step of that name.
func TestStepFailedEdgeStepFailedThenRetriedWithGoSameName(t *testing.T) {
	env := memEnv(t)
	var fetches atomic.Int32
	j := jobs.MustDefine("edge-step-then-go", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			fetch := func(context.Context) (int, error) {
				if fetches.Add(1) == 1 {
					return 0, errors.New("timeout")
				}
				return 7, nil
			}
			v, err := jobs.Step(ctx, "fetch", fetch)
			if err != nil {
				// Try again, beside a hedge.
				f := jobs.Go(ctx, "fetch", fetch)
				h := jobs.Go(ctx, "fetch-mirror", func(context.Context) (int, error) { return 8, nil })
				if err := jobs.AwaitAll(ctx, f, h); err != nil {
					return 0, err
				}
				v, _ = f.Await(ctx)
			}
			if _, err := jobs.Step(ctx, "after", func(context.Context) (int, error) { return v, nil }); err != nil {
				return 0, err
			}
			return v, nil
		})
	env.Worker(worker.Config{}, j)
	id := enqueue(t, env, j, 1)
	run := edgeFinal(t, env, id)
	t.Logf("history %s", strings.Join(testenv.Kinds(env.History(id)), ","))
	if run.State != store.StateCompleted {
		t.Fatalf("run %s: %s %s", run.State, run.ErrorCode, run.Error)
	}
}

// A body that awaits its parallel steps, does unrelated work, and returns the errors it collected
// at the end: the failure is returned, so the retry must run the failed step again.
func TestStepFailedEdgeCollectedFutureFailureReturnedAfterAnotherStep(t *testing.T) {
	env := memEnv(t)
	var fRuns atomic.Int32
	j := jobs.MustDefine("edge-collect", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			f := jobs.Go(ctx, "sync-crm", func(context.Context) (int, error) {
				if fRuns.Add(1) == 1 {
					return 0, errors.New("crm down")
				}
				return 1, nil
			})
			_, errF := f.Await(ctx)
			// Unconditional, independent work.
			_, errH := jobs.Step(ctx, "send-receipt", func(context.Context) (int, error) { return 2, nil })
			if err := errors.Join(errF, errH); err != nil {
				return 0, err
			}
			return 3, nil
		}, jobs.Retry(jobs.RetryPolicy{Attempts: 3, Delay: time.Millisecond}))
	env.Worker(worker.Config{}, j)
	id := enqueue(t, env, j, 1)
	for range 3 {
		r := env.Await(id, store.StateDelayed, store.StateCompleted, store.StateFailed)
		if r.State != store.StateDelayed {
			break
		}
		env.Advance(time.Second)
	}
	run := edgeFinal(t, env, id)
	// The failure is history once the body made another durable call after it (send-receipt):
	// the calls after it may depend on it, so every retry replays it. To have a retry run a step
	// again, return its failure before the next durable call (TestStepFailedEdgeHandledThenReturnedRetriesBoth).
	if run.State != store.StateFailed || fRuns.Load() != 1 {
		t.Fatalf("run %s: %s %s; sync-crm ran %d times; want failed with the recorded failure, sync-crm run once", run.State, run.ErrorCode, run.Error, fRuns.Load())
	}
}

// More failures in a loop than one record takes (frontend.MaxRecordCommands), then success, a
// sleep, and a replay that must match every try; and a loop whose failures are all flushed
// ahead of the completion.
func TestStepFailedEdgeManyFailuresInALoop(t *testing.T) {
	const fails = 2100
	env := memEnv(t)
	var polls atomic.Int32
	j := jobs.MustDefine("edge-many", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			try := 0
			for ; ; try++ {
				_, err := jobs.Step(ctx, "poll", func(context.Context) (int, error) {
					if n := polls.Add(1); int(n) <= fails {
						return 0, fmt.Errorf("not ready %d", n)
					}
					return 1, nil
				})
				if err == nil {
					break
				}
				if want := fmt.Sprintf("not ready %d", try+1); err.Error() != want {
					return 0, fmt.Errorf("try %d saw %q, want %q", try, err, want)
				}
			}
			if in == 1 {
				if err := jobs.Sleep(ctx, "settle", time.Hour); err != nil {
					return 0, err
				}
			}
			return try, nil
		})
	env.Worker(worker.Config{StickyRuns: -1}, j)
	id := enqueue(t, env, j, 1)
	env.Await(id, store.StateSuspended, store.StateFailed)
	env.Advance(time.Hour)
	run := edgeFinal(t, env, id)
	if tries, _ := j.Result(run.Result); run.State != store.StateCompleted || tries != fails || polls.Load() != fails+1 {
		t.Fatalf("run %s %s %s: tries %d polls %d", run.State, run.ErrorCode, run.Error, tries, polls.Load())
	}
	events := env.History(id)
	if err := replay.Check(context.Background(), j, events); err != nil {
		t.Fatalf("check: %v", err)
	}
	// All failures, then the completion.
	polls.Store(0)
	id = enqueue(t, env, j, 2)
	run = edgeFinal(t, env, id)
	if tries, _ := j.Result(run.Result); run.State != store.StateCompleted || tries != fails {
		t.Fatalf("run %s %s %s: tries %d", run.State, run.ErrorCode, run.Error, tries)
	}
	polls.Store(0)
	if err := replay.Check(context.Background(), j, env.History(id)); err != nil || polls.Load() != 0 {
		t.Fatalf("check: %v (ran %d polls)", err, polls.Load())
	}
}

// Many parallel steps fail at once while sequential steps fail too; every failure is seen with
// AwaitAll, the body goes on, sleeps, and the replay must match. Run under -race.
func TestStepFailedEdgeManyFuturesFailingWhileTheBodyRecords(t *testing.T) {
	for _, sticky := range []int{0, -1} {
		t.Run(fmt.Sprint("sticky=", sticky), func(t *testing.T) {
			env := memEnv(t)
			var runs atomic.Int32
			j := jobs.MustDefine("edge-fanout", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
				func(ctx *jobs.Ctx, in int) (int, error) {
					var fs []jobs.Awaitable
					var typed []*jobs.Future[int]
					for i := range 40 {
						f := jobs.Go(ctx, fmt.Sprintf("part-%d", i), func(context.Context) (int, error) {
							n := runs.Add(1)
							if i%3 == 0 {
								return 0, jobs.Errorf("X_PART", "part %d failed (run %d)", i, n)
							}
							return i, nil
						})
						fs = append(fs, f)
						typed = append(typed, f)
						// The body's own steps fail and record while the futures finish.
						if _, err := jobs.Step(ctx, fmt.Sprintf("seq-%d", i), func(context.Context) (int, error) {
							if i%2 == 0 {
								return 0, errors.New("even")
							}
							return i, nil
						}); err != nil && i%4 == 0 {
							if _, err := jobs.Step(ctx, fmt.Sprintf("fix-%d", i), func(context.Context) (int, error) { return i, nil }); err != nil {
								return 0, err
							}
						}
					}
					_ = jobs.AwaitAll(ctx, fs...)
					sum := 0
					for _, f := range typed {
						v, err := f.Await(ctx)
						if err != nil {
							sum += 1000
						}
						sum += v
					}
					if err := jobs.Sleep(ctx, "settle", time.Hour); err != nil {
						return 0, err
					}
					return sum, nil
				})
			env.Worker(worker.Config{StickyRuns: sticky}, j)
			id := enqueue(t, env, j, 1)
			env.Await(id, store.StateSuspended, store.StateFailed, store.StateBlocked)
			env.Advance(time.Hour)
			run := edgeFinal(t, env, id)
			if run.State != store.StateCompleted {
				t.Fatalf("run %s: %s %s", run.State, run.ErrorCode, run.Error)
			}
			if runs.Load() != 40 {
				t.Fatalf("the parallel steps ran %d times, want 40", runs.Load())
			}
			if err := replay.Check(context.Background(), j, env.History(id)); err != nil {
				t.Fatalf("check: %v", err)
			}
		})
	}
}

// A step that fails on its StepTimeout, in a retry loop with a durable sleep between tries, and
// attempt retries around it.
func TestStepFailedEdgeStepTimeoutRetryLoop(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	var tries atomic.Int32
	j := jobs.MustDefine("edge-timeout-loop", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			for try := 0; try < 3; try++ {
				_, err := jobs.Step(ctx, "slow", func(c context.Context) (int, error) {
					if tries.Add(1) < 3 {
						<-c.Done()
						return 0, c.Err()
					}
					return 1, nil
				})
				if err == nil {
					return try, nil
				}
				if !jobs.HasCode(err, jobs.CodeStepTimeout) {
					return 0, fmt.Errorf("try %d: %v (code %q), want a step timeout", try, err, jobs.CodeOf(err))
				}
				if err := jobs.Sleep(ctx, fmt.Sprint("backoff-", try), time.Minute); err != nil {
					return 0, err
				}
			}
			return -1, nil
		}, jobs.StepTimeout(time.Second), jobs.Retry(jobs.RetryPolicy{Attempts: 3, Delay: time.Millisecond}))
	env.Worker(worker.Config{StickyRuns: -1}, j)
	id := enqueue(t, env, j, 1)
	for range 2 {
		// The step waits on the fake clock's timer.
		deadline := time.Now().Add(5 * time.Second)
		for {
			r, _ := env.Engine.GetRun(context.Background(), id)
			if r.State == store.StateSuspended || time.Now().After(deadline) {
				break
			}
			env.Fake().Advance(time.Second)
			time.Sleep(5 * time.Millisecond)
		}
		env.Advance(time.Minute)
	}
	run := edgeFinal(t, env, id)
	if v, _ := j.Result(run.Result); run.State != store.StateCompleted || v != 2 || tries.Load() != 3 {
		t.Fatalf("run %s %s %s: result %d after %d tries", run.State, run.ErrorCode, run.Error, v, tries.Load())
	}
}

// A handled failure, then a returned one: the attempt fails, and the retry runs both again
// (neither was recorded: nothing was recorded between them).
func TestStepFailedEdgeHandledThenReturnedRetriesBoth(t *testing.T) {
	env := memEnv(t)
	var a, b atomic.Int32
	j := jobs.MustDefine("edge-handled-returned", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (string, error) {
			via := "a"
			if _, err := jobs.Step(ctx, "a", func(context.Context) (int, error) {
				if a.Add(1) == 1 {
					return 0, errors.New("a down")
				}
				return 1, nil
			}); err != nil {
				via = "fallback"
			}
			if _, err := jobs.Step(ctx, "b", func(context.Context) (int, error) {
				if b.Add(1) == 1 {
					return 0, errors.New("b down")
				}
				return 1, nil
			}); err != nil {
				return "", err
			}
			return via, nil
		}, jobs.Retry(jobs.RetryPolicy{Attempts: 3, Delay: time.Millisecond}))
	env.Worker(worker.Config{}, j)
	id := enqueue(t, env, j, 1)
	env.Await(id, store.StateDelayed, store.StateCompleted, store.StateFailed)
	env.Advance(time.Second)
	run := edgeFinal(t, env, id)
	if v, _ := j.Result(run.Result); run.State != store.StateCompleted || v != "a" || a.Load() != 2 || b.Load() != 2 {
		t.Fatalf("run %s %s: via %q, a ran %d, b ran %d", run.State, run.Error, v, a.Load(), b.Load())
	}
	for _, ev := range env.History(id) {
		if ev.Kind == history.KindStepFailed {
			t.Fatalf("history records %s:%s", ev.Kind, ev.Name)
		}
	}
}

// Failures the body went on past, then a change point, a publish, a child run and a wait, with a
// replay at every wake-up.
func TestStepFailedEdgeFailuresAheadOfEveryKindOfRecord(t *testing.T) {
	env := memEnv(t)
	var fails atomic.Int32
	child := jobs.MustDefine("edge-child", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) { return in * 2, nil })
	flaky := func(name string) func(context.Context) (int, error) {
		return func(context.Context) (int, error) {
			fails.Add(1)
			return 0, jobs.Errorf("X_FLAKY", "%s failed", name)
		}
	}
	var seen atomic.Value
	seen.Store("")
	j := jobs.MustDefine("edge-kinds", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			log := []string{}
			note := func(err error) {
				log = append(log, fmt.Sprintf("%s|%s", jobs.CodeOf(err), err))
			}
			if _, err := jobs.Step(ctx, "s1", flaky("s1")); err != nil {
				note(err)
			}
			v, err := jobs.Version(ctx, "cp", 1, 2)
			if err != nil {
				return 0, err
			}
			if _, err := jobs.Step(ctx, "s2", flaky("s2")); err != nil {
				note(err)
			}
			if _, err := jobs.Publish(ctx, "edge.evt", map[string]any{"v": v}); err != nil {
				return 0, err
			}
			if _, err := jobs.Step(ctx, "s3", flaky("s3")); err != nil {
				note(err)
			}
			c, err := child.Call(ctx, "child", 21)
			if err != nil {
				return 0, err
			}
			f := jobs.Go(ctx, "s4", flaky("s4"))
			if _, err := f.Await(ctx); err != nil {
				note(err)
			}
			if _, _, err := jobs.WaitForEvent[map[string]any](ctx, "wait", "edge.never", jobs.Match{"k": "v"}, time.Hour); err != nil {
				return 0, err
			}
			if _, err := jobs.Step(ctx, "s5", flaky("s5")); err != nil {
				note(err)
			}
			if err := jobs.Sleep(ctx, "nap", time.Hour); err != nil {
				return 0, err
			}
			s := strings.Join(log, ";")
			if prev := seen.Load().(string); prev != "" && prev != s {
				return 0, fmt.Errorf("saw %q, before %q", s, prev)
			}
			seen.Store(s)
			return c, nil
		})
	env.Worker(worker.Config{StickyRuns: -1}, j, child)
	id := enqueue(t, env, j, 1)
	env.Await(id, store.StateSuspended) // the child
	for range 3 {
		r := env.Await(id, store.StateSuspended, store.StateCompleted, store.StateFailed, store.StateBlocked)
		if r.State != store.StateSuspended {
			break
		}
		env.Advance(time.Hour)
		time.Sleep(20 * time.Millisecond)
	}
	run := edgeFinal(t, env, id)
	t.Logf("history %s", strings.Join(testenv.Kinds(env.History(id)), ","))
	if v, _ := j.Result(run.Result); run.State != store.StateCompleted || v != 42 || fails.Load() != 5 {
		t.Fatalf("run %s %s %s: result %d, %d failed tries (want 5)", run.State, run.ErrorCode, run.Error, v, fails.Load())
	}
	if err := replay.Check(context.Background(), j, env.History(id)); err != nil {
		t.Fatalf("check: %v", err)
	}
}

// The failed step's name is free; the body tries again beside a hedge, and that try fails too.
// The live attempt records it all; the replay at the wake-up must match it.
func TestStepFailedEdgeStepFailedThenGoSameNameBothFail(t *testing.T) {
	env := memEnv(t)
	j := jobs.MustDefine("edge-step-then-go-fail", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			fetch := func(context.Context) (int, error) { return 0, errors.New("origin down") }
			v, err := jobs.Step(ctx, "fetch", fetch)
			if err != nil {
				f := jobs.Go(ctx, "fetch", fetch)
				m := jobs.Go(ctx, "fetch-mirror", func(context.Context) (int, error) { return 8, nil })
				i, err := jobs.AwaitFirst(ctx, f, m)
				if err != nil {
					return 0, err
				}
				_ = jobs.AwaitAll(ctx, f, m) // look at both
				if i == 1 {
					v, _ = m.Await(ctx)
				}
			}
			if err := jobs.Sleep(ctx, "settle", time.Hour); err != nil {
				return 0, err
			}
			return v, nil
		})
	env.Worker(worker.Config{StickyRuns: -1}, j)
	id := enqueue(t, env, j, 1)
	r := env.Await(id, store.StateSuspended, store.StateFailed, store.StateBlocked)
	t.Logf("live history %s", strings.Join(testenv.Kinds(env.History(id)), ","))
	if r.State != store.StateSuspended {
		t.Fatalf("run %s: %s %s", r.State, r.ErrorCode, r.Error)
	}
	env.Advance(time.Hour)
	run := edgeFinal(t, env, id)
	if run.State != store.StateCompleted {
		t.Fatalf("run %s: %s %s", run.State, run.ErrorCode, run.Error)
	}
}

// A step whose error carries an upstream's whole answer (a few MB of HTML, say); the body goes on
// to a fallback. The worker reaches the engine over HTTP, as a remote worker does.
func TestStepFailedEdgeHugeErrorTextOverHTTP(t *testing.T) {
	env, c := edgeOverHTTP(t)
	var tries atomic.Int32
	page := strings.Repeat("<p>bad gateway</p>", 200_000) // 3.6 MB
	j := jobs.MustDefine("edge-huge-error", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (string, error) {
			via := "primary"
			if _, err := jobs.Step(ctx, "primary", func(context.Context) (int, error) {
				tries.Add(1)
				return 0, fmt.Errorf("upstream answered 502: %s", page)
			}); err != nil {
				via = "secondary"
			}
			if _, err := jobs.Step(ctx, "record-route", func(context.Context) (string, error) { return via, nil }); err != nil {
				return "", err
			}
			return via, nil
		}, jobs.Retry(jobs.RetryPolicy{Attempts: 2, Delay: time.Millisecond}))
	env.Worker(worker.Config{Frontend: c}, j)
	id := enqueue(t, env, j, 1)
	r := env.Await(id, store.StateDelayed, store.StateCompleted, store.StateFailed)
	if r.State == store.StateDelayed {
		env.Advance(time.Second)
	}
	run := edgeFinal(t, env, id)
	if v, _ := j.Result(run.Result); run.State != store.StateCompleted || v != "secondary" {
		t.Fatalf("run %s: %s %.300s; primary tried %d times", run.State, run.ErrorCode, run.Error, tries.Load())
	}
}

// Error texts with odd bytes, and one past the 16 KiB the engine keeps: what the body sees live
// and on replay.
func TestStepFailedEdgeOddErrorTextsLiveAndReplayed(t *testing.T) {
	for _, tc := range []struct{ name, text string }{
		{"bad-utf8", "reply \xff\xfe from upstream"},
		{"nul", "a\x00b"},
		{"long", strings.Repeat("x", 20<<10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := memEnv(t)
			var seen []string
			j := jobs.MustDefine("edge-odd-"+tc.name, func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
				func(ctx *jobs.Ctx, in int) (int, error) {
					_, err := jobs.Step(ctx, "s", func(context.Context) (int, error) { return 0, errors.New(tc.text) })
					if err == nil {
						return 0, errors.New("no failure")
					}
					seen = append(seen, err.Error())
					if err := jobs.Sleep(ctx, "nap", time.Hour); err != nil {
						return 0, err
					}
					return len(err.Error()), nil
				})
			env.Worker(worker.Config{StickyRuns: -1}, j)
			id := enqueue(t, env, j, 1)
			env.Await(id, store.StateSuspended)
			env.Advance(time.Hour)
			run := edgeFinal(t, env, id)
			if run.State != store.StateCompleted || len(seen) != 2 {
				t.Fatalf("run %s %s, seen %d", run.State, run.Error, len(seen))
			}
			// A failure's text is kept as every failure text is: cleaned to valid UTF-8 without
			// NUL and cut at frontend.MaxErrorText. The body sees that text on replay.
			if seen[0] != tc.text || seen[1] != freetext.Cut(tc.text, frontend.MaxErrorText) {
				t.Errorf("live the body saw %d bytes %.40q, replayed %d bytes %.40q", len(seen[0]), seen[0], len(seen[1]), seen[1])
			}
		})
	}
}

type edgeNilErr struct{ msg string }

func (e *edgeNilErr) Error() string { return e.msg }

// A typed nil error (the classic Go mistake in a client library): the body only checks err != nil
// and goes on to a fallback, as it did before failures were recorded.
func TestStepFailedEdgeTypedNilStepError(t *testing.T) {
	env := memEnv(t)
	j := jobs.MustDefine("edge-typed-nil", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (string, error) {
			_, err := jobs.Step(ctx, "lookup", func(context.Context) (int, error) {
				var e *edgeNilErr
				return 0, e
			})
			if err != nil {
				if _, err := jobs.Step(ctx, "fallback", func(context.Context) (int, error) { return 1, nil }); err != nil {
					return "", err
				}
				return "fallback", nil
			}
			return "lookup", nil
		})
	env.Worker(worker.Config{}, j)
	id := enqueue(t, env, j, 1)
	run := env.Await(id, store.StateCompleted, store.StateDelayed, store.StateFailed)
	if run.State != store.StateCompleted {
		t.Fatalf("run %s: %s %.200s", run.State, run.ErrorCode, run.Error)
	}
}

// Not one huge text but many ordinary ones: a retry loop whose tries each fail with an 8 KiB
// error (under the 16 KiB the engine keeps), over HTTP.
func TestStepFailedEdgeManyModestErrorTextsOverHTTP(t *testing.T) {
	env, c := edgeOverHTTP(t)
	var polls atomic.Int32
	body := strings.Repeat("e", 8<<10)
	j := jobs.MustDefine("edge-modest-errors", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			var err error
			for try := 0; try < 1000; try++ {
				if _, err = jobs.Step(ctx, "poll", func(context.Context) (int, error) {
					if polls.Add(1) <= 300 {
						return 0, fmt.Errorf("not ready: %s", body)
					}
					return 1, nil
				}); err == nil {
					return try, nil
				}
			}
			return 0, err
		})
	reg, err := jobs.NewRegistry(j)
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Config{Frontend: c, Registry: reg, Clock: env.Clock, Logger: env.Logger, PollWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	}()
	id := enqueue(t, env, j, 1)
	run := edgeAwaitFor(t, env, id, 4*time.Second, store.StateCompleted, store.StateFailed, store.StateDelayed)
	if run.State != store.StateCompleted {
		t.Fatalf("run %s after 4s: %s %.200s; the poll ran %d times (it succeeds from the 301st)", run.State, run.ErrorCode, run.Error, polls.Load())
	}
}

func edgeAwaitFor(t *testing.T, env *testenv.Env, id string, d time.Duration, states ...store.State) store.Run {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		r, err := env.Engine.GetRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range states {
			if r.State == s {
				return r
			}
		}
		if time.Now().After(deadline) {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// payViaParallelFallback is a job whose charge fails once, declined, and whose body then falls
// back to an invoice started with jobs.Go; with label, a step records the choice; then ship fails
// once with shipErr. It counts the charges.
func payViaParallelFallback(name string, charges *atomic.Int32, label bool, shipErr error, opts ...jobs.Option) *jobs.Job[int, string] {
	var ships atomic.Int32
	return jobs.MustDefine(name, func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (string, error) {
			via := "card"
			if _, err := jobs.Step(ctx, "charge", func(context.Context) (int, error) {
				if charges.Add(1) == 1 {
					return 0, jobs.Errorf(codeDeclined, "declined")
				}
				return 1, nil
			}); err != nil {
				via = "invoice"
				inv := jobs.Go(ctx, "invoice", func(context.Context) (int, error) { return 1, nil })
				if _, err := inv.Await(ctx); err != nil {
					return "", err
				}
			}
			if label {
				if _, err := jobs.Step(ctx, "label", func(context.Context) (string, error) { return via, nil }); err != nil {
					return "", err
				}
			}
			if _, err := jobs.Step(ctx, "ship", func(context.Context) (int, error) {
				if ships.Add(1) == 1 {
					return 0, shipErr
				}
				return 1, nil
			}); err != nil {
				return "", err
			}
			return via, nil
		}, opts...)
}

// A failure the body went on past, down a fallback that is a parallel step; a later step then
// fails and the body returns that. The retry must replay the first failure: the fallback's record
// depends on it.
func TestStepFailedEdgeFailureLostBehindAParallelFallback(t *testing.T) {
	env := memEnv(t)
	var charges atomic.Int32
	j := payViaParallelFallback("edge-lost-behind-parallel", &charges, false, errors.New("carrier timeout"), // retryable
		jobs.Retry(jobs.RetryPolicy{Attempts: 3, Delay: time.Millisecond}))
	env.Worker(worker.Config{}, j)
	id := enqueue(t, env, j, 1)
	env.Await(id, store.StateDelayed, store.StateFailed, store.StateCompleted)
	env.Advance(time.Second)
	run := edgeFinal(t, env, id)
	if via, _ := j.Result(run.Result); run.State != store.StateCompleted || via != "invoice" || charges.Load() != 1 {
		t.Fatalf("run %s %s %q: via %q, charged %d times; want completed via invoice, charged once", run.State, run.ErrorCode, run.Error, via, charges.Load())
	}
}

// An operator re-runs a dead run from the failed step whose failure sent it down a fallback; the
// fallback started a parallel step, and a step after it recorded the failure. The retry must
// discard the failure and everything the body did because of it.
func TestStepFailedEdgeRetryFromAFailedStepWhoseFallbackRanInParallel(t *testing.T) {
	env := memEnv(t)
	var charges atomic.Int32
	j := payViaParallelFallback("edge-retry-from-parallel-fallback", &charges, true,
		jobs.Errorf(jobs.CodeBadRequest, "no address")) // terminal: dead-letters
	env.Worker(worker.Config{}, j)
	id := enqueue(t, env, j, 1)
	env.Await(id, store.StateFailed)
	if _, err := env.Engine.Retry(context.Background(), engine.RetryRequest{RunID: id, FromStep: "charge", By: "ops", Reason: "card fixed"}); err != nil {
		t.Fatalf("retry from the failed step: %v", err)
	}
	run := edgeFinal(t, env, id)
	if via, _ := j.Result(run.Result); run.State != store.StateCompleted || via != "card" || charges.Load() != 2 {
		t.Fatalf("run %s %s %q via %q, charged %d times; want completed via card, the charge run again", run.State, run.ErrorCode, run.Error, via, charges.Load())
	}
}

// A run cancelled while its body goes round a loop of failing steps: the failures queued after
// the cancel must not land.
func TestStepFailedEdgeCancelDuringAFailingLoop(t *testing.T) {
	env := memEnv(t)
	started, release := make(chan struct{}), make(chan struct{})
	var after atomic.Value
	j := jobs.MustDefine("edge-cancel-loop", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			for try := 0; try < 50; try++ {
				_, _ = jobs.Step(ctx, "poll", func(c context.Context) (int, error) {
					if try == 0 {
						close(started)
						<-release
					}
					return 0, errors.New("not yet")
				})
			}
			_, err := jobs.Step(ctx, "after", func(context.Context) (int, error) { return 1, nil })
			after.Store(fmt.Sprint(err))
			return 0, err
		})
	env.Worker(worker.Config{}, j)
	id := enqueue(t, env, j, 1)
	<-started
	if _, err := env.Engine.Cancel(context.Background(), id, "edge"); err != nil {
		t.Fatal(err)
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for after.Load() == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("the step after the loop: %v", after.Load())
	run, _ := env.Engine.GetRun(context.Background(), id)
	if run.State != store.StateCancelled {
		t.Fatalf("run %s after cancel", run.State)
	}
	for _, ev := range env.History(id) {
		if ev.Kind == history.KindStepFailed || ev.Kind == history.KindStepCompleted {
			t.Fatalf("recorded %s:%s after the cancel", ev.Kind, ev.Name)
		}
	}
}

// AwaitFirst sees a failure first, then a success; the replay must name the same future.
func TestStepFailedEdgeAwaitFirstAfterASeenFailureReplays(t *testing.T) {
	env := memEnv(t)
	var aRuns atomic.Int32
	j := jobs.MustDefine("edge-first-after-failure", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			aFailed := make(chan struct{})
			a := jobs.Go(ctx, "a", func(context.Context) (int, error) {
				defer close(aFailed)
				if aRuns.Add(1) == 1 {
					return 0, errors.New("a down")
				}
				return 1, nil
			})
			b := jobs.Go(ctx, "b", func(context.Context) (int, error) { <-aFailed; time.Sleep(20 * time.Millisecond); return 2, nil })
			i, err := jobs.AwaitFirst(ctx, a, b)
			if err != nil {
				return 0, err
			}
			if err := jobs.Sleep(ctx, "nap", time.Hour); err != nil {
				return 0, err
			}
			return i, nil
		})
	_, run := sleepOnce(t, env, -1, j)
	if i, _ := j.Result(run.Result); run.State != store.StateCompleted || i != 1 || aRuns.Load() != 1 {
		t.Fatalf("run %s %s: first %d, a ran %d", run.State, run.Error, i, aRuns.Load())
	}
}

// An operator re-runs a dead run from a step tried in a loop with sleeps between the tries.
func TestStepFailedEdgeRetryFromALoopedStep(t *testing.T) {
	env := memEnv(t)
	var polls, ships atomic.Int32
	j := jobs.MustDefine("edge-retry-from-loop", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			try := 0
			for ; ; try++ {
				if _, err := jobs.Step(ctx, "poll", func(context.Context) (int, error) {
					if n := polls.Add(1); n == 1 || n == 2 {
						return 0, errors.New("not ready")
					}
					return 1, nil
				}); err == nil {
					break
				}
				if err := jobs.Sleep(ctx, fmt.Sprint("backoff-", try), time.Minute); err != nil {
					return 0, err
				}
			}
			if _, err := jobs.Step(ctx, "ship", func(context.Context) (int, error) {
				if ships.Add(1) == 1 {
					return 0, jobs.Errorf(jobs.CodeBadRequest, "no address")
				}
				return 1, nil
			}); err != nil {
				return 0, err
			}
			return try, nil
		})
	env.Worker(worker.Config{StickyRuns: -1}, j)
	id := enqueue(t, env, j, 1)
	for range 2 {
		env.Await(id, store.StateSuspended)
		env.Advance(time.Minute)
	}
	env.Await(id, store.StateFailed)
	if _, err := env.Engine.Retry(context.Background(), engine.RetryRequest{RunID: id, FromStep: "poll"}); err != nil {
		t.Fatal(err)
	}
	run := edgeFinal(t, env, id)
	if v, _ := j.Result(run.Result); run.State != store.StateCompleted || v != 2 || polls.Load() != 4 {
		t.Fatalf("run %s %s: try %d, polls %d", run.State, run.Error, v, polls.Load())
	}
}
