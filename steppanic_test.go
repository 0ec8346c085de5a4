package jobs_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// panicInStep is where the steps below panic: the failure's text must name it, carried from the
// step's own goroutine.
//
//go:noinline
func panicInStep() { panic("boom in step") }

// A panic in a step's function fails the attempt, which is retried, wherever the step runs: in
// line on the body's goroutine, or on a goroutine of its own (a Step under a StepTimeout, a
// parallel step with or without one), where nothing used to recover it and it ended the
// process. The attempt's error names the step, the panic's value and the stack it happened on.
func TestStepPanicFailsTheAttemptOnEveryGoroutine(t *testing.T) {
	t.Parallel()
	inline := func(c *jobs.Ctx, fn func(context.Context) (int, error)) (int, error) {
		return jobs.Step(c, "risky", fn)
	}
	parallel := func(c *jobs.Ctx, fn func(context.Context) (int, error)) (int, error) {
		return jobs.Go(c, "risky", fn).Await(c)
	}
	for _, tc := range []struct {
		name string
		call func(*jobs.Ctx, func(context.Context) (int, error)) (int, error)
		opts []jobs.Option
	}{
		{"step", inline, nil},
		{"step under a stepTimeout", inline, []jobs.Option{jobs.StepTimeout(time.Minute)}},
		{"parallel step", parallel, nil},
		{"parallel step under a stepTimeout", parallel, []jobs.Option{jobs.StepTimeout(time.Minute)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t, testenv.Options{Store: memory.New()})
			var calls atomic.Int32
			opts := append([]jobs.Option{jobs.Retry(jobs.RetryPolicy{Attempts: 3, Backoff: jobs.Fixed, Delay: time.Second})}, tc.opts...)
			j := jobs.MustDefine("panicky", func(int) string { return "k" }, jobs.NoTenant[int](),
				func(c *jobs.Ctx, _ int) (int, error) {
					return tc.call(c, func(context.Context) (int, error) {
						if calls.Add(1) == 1 {
							panicInStep()
						}
						return 7, nil
					})
				}, opts...)
			env.Worker(worker.Config{}, j)
			id := enqueue(t, env, j, 1)
			failed := awaitAttempt(t, env, id, 1)
			if failed.Code != "" || failed.Stop != "" {
				t.Errorf("the panic is %q, stop %q; want unclassified and retried, like a body's panic", failed.Code, failed.Stop)
			}
			want := []string{"panicked: boom in step", "panicInStep"}
			if tc.opts != nil || strings.HasPrefix(tc.name, "parallel") {
				// Off the body's goroutine, the text also names the step it was recovered in.
				want = append(want, `step "risky" panicked`)
			}
			for _, want := range want {
				if !strings.Contains(failed.Error, want) {
					t.Errorf("the attempt's error lacks %q:\n%s", want, failed.Error)
				}
			}
			env.Advance(time.Second)
			run := env.Await(id, store.StateCompleted)
			if out, err := j.Result(run.Result); err != nil || out != 7 || calls.Load() != 2 || run.Attempt != 2 {
				t.Fatalf("result %d (%v) after %d calls, attempt %d; want 7 on the second", out, err, calls.Load(), run.Attempt)
			}
		})
	}
}

// A body that recovers a step's panic carries on as after a failed step: its next durable call is
// not refused as a call inside a step (X_STEP_NESTED), and it may try the same step again, which
// is recorded once. The execution used to keep believing it was inside the step, with the step's
// name taken.
func TestABodyThatRecoversAStepPanicCarriesOn(t *testing.T) {
	t.Parallel()
	for _, timeout := range []time.Duration{0, time.Minute} { // in line, and on the step's own goroutine
		var calls atomic.Int32
		opts := []jobs.Option{jobs.Retry(jobs.RetryPolicy{Attempts: 1})}
		if timeout > 0 {
			opts = append(opts, jobs.StepTimeout(timeout))
		}
		j := jobs.MustDefine("recovers", func(int) string { return "k" }, jobs.NoTenant[int](),
			func(c *jobs.Ctx, in int) (int, error) {
				try := func() (n int, err error) {
					defer func() {
						if r := recover(); r != nil {
							err = jobs.Errorf("X_TRIED", "recovered: %v", r)
						}
					}()
					return jobs.Step(c, "flaky", func(context.Context) (int, error) {
						if calls.Add(1) == 1 {
							panicInStep()
						}
						return 7, nil
					})
				}
				if _, err := try(); err == nil {
					return 0, jobs.Errorf("X_TEST", "the first try did not panic")
				}
				n, err := try()
				if err != nil {
					return 0, err
				}
				if _, err := jobs.Step(c, "after", func(context.Context) (int, error) { return 1, nil }); err != nil {
					return 0, err
				}
				return n, nil
			}, opts...)
		env := testenv.Start(t, testenv.Options{Store: memory.New()})
		env.Worker(worker.Config{}, j)
		res, err := j.Enqueue(t.Context(), env.Engine, 1)
		if err != nil {
			t.Fatal(err)
		}
		run := env.Await(res.RunID, store.StateCompleted, store.StateFailed)
		if run.State != store.StateCompleted {
			t.Fatalf("timeout %s: the run %s: %s %s", timeout, run.State, run.ErrorCode, run.Error)
		}
		steps := 0
		for _, ev := range env.History(res.RunID) {
			if ev.Kind == history.KindStepCompleted {
				steps++
			}
		}
		if steps != 2 {
			t.Fatalf("timeout %s: %d steps recorded; want flaky once and after", timeout, steps)
		}
	}
}
