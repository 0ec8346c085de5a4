package jobs_test

// More edges of recording failed steps: a name tried again across Step and jobs.Go, a recovered
// panic, wrapped codes, a retry-after past the horizon, operator retries of a failed future,
// futures failing at random while the body records, and a cancel with a failure queued.

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
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/replay"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// moreSleepRun runs j (input 1) on a fresh engine with the given stickiness (sleepOnce).
func moreSleepRun[Out any](t *testing.T, sticky int, j *jobs.Job[int, Out]) (*testenv.Env, string, store.Run) {
	t.Helper()
	env := memEnv(t)
	id, run := sleepOnce(t, env, sticky, j)
	return env, id, run
}

// A parallel step fails; the body tries it again under the same name as a Step. A future's name
// stays used once started (futures are matched by name, one outcome each): the second call is
// X_STEP_DUPLICATE, terminal, and the step is not run again. Try again under a new name.
func TestStepFailedMoreGoFailedThenStepSameName(t *testing.T) {
	env := memEnv(t)
	var fetches atomic.Int32
	j := jobs.MustDefine("more-go-then-step", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			fetch := func(context.Context) (int, error) {
				fetches.Add(1)
				return 0, errors.New("timeout")
			}
			if _, err := jobs.Go(ctx, "fetch", fetch).Await(ctx); err == nil {
				return 0, errors.New("the future did not fail")
			}
			return jobs.Step(ctx, "fetch", fetch)
		})
	env.Worker(worker.Config{}, j)
	id := enqueue(t, env, j, 1)
	run := env.Await(id, store.StateFailed, store.StateCompleted, store.StateBlocked)
	if run.State != store.StateFailed || run.ErrorCode != string(jobs.CodeStepDuplicate) || fetches.Load() != 1 {
		t.Fatalf("run %s %s %q, fetch ran %d times; want failed X_STEP_DUPLICATE, fetch once", run.State, run.ErrorCode, run.Error, fetches.Load())
	}
}

// A Step fails; the body tries again under the name with jobs.Go; then a sleep and a replay.
func TestStepFailedMoreStepFailedThenGoSameNameReplayed(t *testing.T) {
	var fetches atomic.Int32
	j := jobs.MustDefine("more-step-then-go-replayed", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			fetch := func(context.Context) (int, error) {
				if fetches.Add(1) == 1 {
					return 0, errors.New("timeout")
				}
				return 7, nil
			}
			v, err := jobs.Step(ctx, "fetch", fetch)
			if err != nil {
				f := jobs.Go(ctx, "fetch", fetch)
				if v, err = f.Await(ctx); err != nil {
					return 0, err
				}
			}
			if err := jobs.Sleep(ctx, "nap", time.Hour); err != nil {
				return 0, err
			}
			return v, nil
		})
	env, id, run := moreSleepRun(t, -1, j)
	if v, _ := j.Result(run.Result); run.State != store.StateCompleted || v != 7 || fetches.Load() != 2 {
		t.Fatalf("run %s %s %s: v %d, fetch ran %d times", run.State, run.ErrorCode, run.Error, v, fetches.Load())
	}
	if err := replay.Check(context.Background(), j, env.History(id)); err != nil {
		t.Fatalf("check: %v", err)
	}
}

// The body recovers a step's panic, which leaves the step as a failed step does, and goes
// on down a fallback; a sleep; the replay.
func TestStepFailedMoreRecoveredStepPanicFallback(t *testing.T) {
	for _, sticky := range []int{0, -1} {
		t.Run(fmt.Sprint("sticky=", sticky), func(t *testing.T) {
			var quotes atomic.Int32
			j := jobs.MustDefine(fmt.Sprint("more-step-panic-", sticky), func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
				func(ctx *jobs.Ctx, in int) (int, error) {
					quote := func() (v int, err error) {
						defer func() {
							if r := recover(); r != nil {
								err = fmt.Errorf("quote panicked: %v", r)
							}
						}()
						return jobs.Step(ctx, "quote", func(context.Context) (int, error) {
							if quotes.Add(1) == 1 {
								var m map[string]int
								m["x"] = 1
							}
							return 40, nil
						})
					}
					price, err := quote()
					if err != nil {
						if price, err = jobs.Step(ctx, "default-price", func(context.Context) (int, error) { return 50, nil }); err != nil {
							return 0, err
						}
					}
					if err := jobs.Sleep(ctx, "nap", time.Hour); err != nil {
						return 0, err
					}
					return price, nil
				})
			_, _, run := moreSleepRun(t, sticky, j)
			if v, _ := j.Result(run.Result); run.State != store.StateCompleted || v != 50 || quotes.Load() != 1 {
				t.Fatalf("run %s %s %s: price %d, quote ran %d times; want the fallback 50, quote run once", run.State, run.ErrorCode, run.Error, v, quotes.Load())
			}
		})
	}
}

const (
	moreCodeOuter jobs.Code = "X_MORE_OUTER"
	moreCodeInner jobs.Code = "X_MORE_INNER"
)

// A step's error wraps a coded cause; the body matches the cause's code with errors.Is (which
// jobs.Error.Is documents as matching on the code alone).
func TestStepFailedMoreWrappedCodeMatchedLiveAndReplayed(t *testing.T) {
	for _, sticky := range []int{0, -1} {
		t.Run(fmt.Sprint("sticky=", sticky), func(t *testing.T) {
			var seen []string
			j := jobs.MustDefine(fmt.Sprint("more-wrapped-", sticky), func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
				func(ctx *jobs.Ctx, in int) (string, error) {
					_, err := jobs.Step(ctx, "charge", func(context.Context) (int, error) {
						return 0, jobs.Wrap(moreCodeOuter, jobs.Errorf(moreCodeInner, "card declined"), "gateway")
					})
					branch := "ok"
					if errors.Is(err, &jobs.Error{Code: moreCodeInner}) {
						branch = "inner"
					} else if err != nil {
						branch = "other"
					}
					var je *jobs.Error
					if errors.As(err, &je) {
						branch += "|" + je.Message
					}
					seen = append(seen, branch)
					if err := jobs.Sleep(ctx, "nap", time.Hour); err != nil {
						return "", err
					}
					return branch, nil
				})
			_, _, run := moreSleepRun(t, sticky, j)
			t.Logf("seen %q", seen)
			if v, _ := j.Result(run.Result); run.State != store.StateCompleted || len(seen) == 0 || v != seen[0] {
				t.Fatalf("run %s %s %s: result %q; the body saw %q live", run.State, run.ErrorCode, run.Error, v, seen)
			}
		})
	}
}

// A step's error names a retry-after past the engine's horizon (a "come back much later" the
// upstream computed); the body goes on to a fallback. The attempt-failure path clamps such a
// delay (retry.go); the StepFailed record must not be refused.
func TestStepFailedMoreHugeRetryAfterOnAHandledFailure(t *testing.T) {
	env := memEnv(t)
	j := jobs.MustDefine("more-huge-retry-after", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (string, error) {
			via := "primary"
			if _, err := jobs.Step(ctx, "primary", func(context.Context) (int, error) {
				return 0, &jobs.Error{Code: codeEdgeBusy, Message: "busy", RetryAfter: 200 * 365 * 24 * time.Hour}
			}); err != nil {
				via = "secondary"
			}
			if _, err := jobs.Step(ctx, "secondary", func(context.Context) (string, error) { return via, nil }); err != nil {
				return "", err
			}
			return via, nil
		}, jobs.Retry(jobs.RetryPolicy{Attempts: 2, Delay: time.Millisecond}))
	env.Worker(worker.Config{}, j)
	id := enqueue(t, env, j, 1)
	r := env.Await(id, store.StateCompleted, store.StateFailed, store.StateDelayed, store.StateBlocked)
	t.Logf("history %s", strings.Join(testenv.Kinds(env.History(id)), ","))
	if v, _ := j.Result(r.Result); r.State != store.StateCompleted || v != "secondary" {
		t.Fatalf("run %s %s: %s", r.State, r.ErrorCode, r.Error)
	}
}

// An operator re-runs a dead run from a parallel step whose failure sent it down a fallback.
func TestStepFailedMoreRetryFromAFailedFuture(t *testing.T) {
	env := memEnv(t)
	var quotes, ships atomic.Int32
	j := jobs.MustDefine("more-retry-from-future", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			f := jobs.Go(ctx, "quote", func(context.Context) (int, error) {
				if quotes.Add(1) == 1 {
					return 0, errors.New("quote down")
				}
				return 40, nil
			})
			price, err := f.Await(ctx)
			if err != nil {
				if price, err = jobs.Step(ctx, "default-price", func(context.Context) (int, error) { return 50, nil }); err != nil {
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
			return price, nil
		})
	env.Worker(worker.Config{StickyRuns: -1}, j)
	id := enqueue(t, env, j, 1)
	env.Await(id, store.StateFailed)
	t.Logf("dead history %s", strings.Join(testenv.Kinds(env.History(id)), ","))
	if _, err := env.Engine.Retry(context.Background(), moreRetryFrom(id, "quote")); err != nil {
		t.Fatalf("retry from the failed future: %v", err)
	}
	run := env.Await(id, store.StateCompleted, store.StateFailed, store.StateBlocked)
	t.Logf("history %s", strings.Join(testenv.Kinds(env.History(id)), ","))
	if v, _ := j.Result(run.Result); run.State != store.StateCompleted || v != 40 || quotes.Load() != 2 {
		t.Fatalf("run %s %s %s: price %d, quote ran %d", run.State, run.ErrorCode, run.Error, v, quotes.Load())
	}
	if err := replay.Check(context.Background(), j, env.History(id)); err != nil {
		t.Fatalf("check: %v", err)
	}
}

// Futures failing at random moments while the body's own steps fail, Go is started right after
// failures, AwaitFirst and AwaitAll are read; then a sleep, a replay, a check.
func TestStepFailedMoreStressFuturesAndBodyFailures(t *testing.T) {
	for _, sticky := range []int{0, -1} {
		for round := range 4 {
			t.Run(fmt.Sprint("sticky=", sticky, "/", round), func(t *testing.T) {
				var runs atomic.Int32
				var trace atomic.Value
				j := jobs.MustDefine(fmt.Sprint("more-stress-", sticky, "-", round), func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
					func(ctx *jobs.Ctx, in int) (string, error) {
						var log []string
						var fs []*jobs.Future[int]
						for i := range 30 {
							f := jobs.Go(ctx, fmt.Sprintf("g-%d", i), func(context.Context) (int, error) {
								runs.Add(1)
								time.Sleep(time.Duration((i*7+round)%5) * 100 * time.Microsecond)
								switch i % 4 {
								case 0:
									return 0, jobs.Errorf("X_G", "g %d failed", i)
								case 1:
									panic(fmt.Sprint("g ", i))
								}
								return i, nil
							})
							fs = append(fs, f)
							_, err := jobs.Step(ctx, fmt.Sprintf("s-%d", i), func(context.Context) (int, error) {
								runs.Add(1)
								if i%3 == 0 {
									return 0, errors.New("s failed")
								}
								return i, nil
							})
							if err != nil {
								log = append(log, fmt.Sprint("s", i))
								if i%2 == 0 && i > 0 {
									// read an earlier future and branch on it
									if _, ferr := fs[i-1].Await(ctx); ferr != nil {
										log = append(log, fmt.Sprint("g", i-1, "x"))
									}
								}
							}
							if i%5 == 4 {
								k, err := jobs.AwaitFirst(ctx, fs[i-4], fs[i-3], fs[i-2], fs[i-1])
								log = append(log, fmt.Sprint("first", k, err != nil))
							}
						}
						for _, f := range fs {
							if _, err := f.Await(ctx); err != nil {
								log = append(log, "x")
							} else {
								log = append(log, "v")
							}
						}
						if err := jobs.Sleep(ctx, "nap", time.Hour); err != nil {
							return "", err
						}
						s := strings.Join(log, ",")
						if prev, _ := trace.Load().(string); prev != "" && prev != s {
							return "", jobs.Errorf(jobs.CodeBadRequest, "replayed %q, live %q", s, prev)
						}
						trace.Store(s)
						return s, nil
					})
				env, id, run := moreSleepRun(t, sticky, j)
				if run.State != store.StateCompleted {
					t.Fatalf("run %s %s %s", run.State, run.ErrorCode, run.Error)
				}
				if runs.Load() != 60 {
					t.Fatalf("%d function runs, want 60", runs.Load())
				}
				if err := replay.Check(context.Background(), j, env.History(id)); err != nil {
					t.Fatalf("check: %v", err)
				}
			})
		}
	}
}

func moreRetryFrom(id, step string) engine.RetryRequest {
	r := engineRetry(id)
	r.FromStep = step
	return r
}

// A run cancelled while a future's failure is queued and the body is inside a step: nothing lands
// after the cancel, and the body does not hang.
func TestStepFailedMoreCancelWithAQueuedFutureFailure(t *testing.T) {
	env := memEnv(t)
	started, release := make(chan struct{}), make(chan struct{})
	var done atomic.Value
	j := jobs.MustDefine("more-cancel-queued", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			f := jobs.Go(ctx, "g", func(context.Context) (int, error) { return 0, errors.New("g down") })
			_, _ = f.Await(ctx)
			_, err := jobs.Step(ctx, "s", func(context.Context) (int, error) {
				close(started)
				<-release
				return 1, nil
			})
			g2 := jobs.Go(ctx, "g2", func(context.Context) (int, error) { return 2, nil })
			_, err2 := g2.Await(ctx)
			done.Store(fmt.Sprint(err, err2))
			return 0, errors.Join(err, err2)
		})
	env.Worker(worker.Config{}, j)
	id := enqueue(t, env, j, 1)
	<-started
	if _, err := env.Engine.Cancel(context.Background(), id, "ra"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for done.Load() == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if done.Load() == nil {
		t.Fatal("the body hung")
	}
	t.Logf("body saw %v; history %s", done.Load(), strings.Join(testenv.Kinds(env.History(id)), ","))
	run, _ := env.Engine.GetRun(context.Background(), id)
	if run.State != store.StateCancelled {
		t.Fatalf("run %s", run.State)
	}
	for _, ev := range env.History(id) {
		if ev.Kind == "StepFailed" || ev.Kind == "StepCompleted" {
			t.Fatalf("recorded %s:%s after the cancel", ev.Kind, ev.Name)
		}
	}
}
