package jobs_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// A step whose function panics is the step a trace is read for: its "jobs.step <name>" span
// ends, failed, with the panic as its error, whether the step runs in line or on its own
// goroutine under a StepTimeout. The panic still fails the attempt, which is retried, as
// untraced.
func TestAPanickingStepEndsItsSpan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []jobs.Option
	}{
		{"step", nil},
		{"step under a stepTimeout", []jobs.Option{jobs.StepTimeout(time.Minute)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := newTracing(t)
			env := testenv.Start(t, testenv.Options{Store: memory.New()})
			var calls atomic.Int32
			opts := append([]jobs.Option{jobs.Retry(jobs.RetryPolicy{Attempts: 2, Backoff: jobs.Fixed, Delay: time.Second})}, tc.opts...)
			j := jobs.MustDefine("panicky-traced", func(int) string { return "k" }, jobs.NoTenant[int](),
				func(c *jobs.Ctx, _ int) (int, error) {
					return jobs.Step(c, "risky", func(context.Context) (int, error) {
						if calls.Add(1) == 1 {
							panicInStep()
						}
						return 7, nil
					})
				}, opts...)
			env.Worker(worker.Config{TracerProvider: tr.tp}, j)
			id := enqueue(t, env, j, 1)
			if failed := awaitAttempt(t, env, id, 1); !strings.Contains(failed.Error, "panicked: boom in step") {
				t.Errorf("the attempt's error is %q; want the step's panic", failed.Error)
			}
			env.Advance(time.Second)
			env.Await(id, store.StateCompleted)

			steps := tr.await(t, "jobs.step risky", 2)
			panicked, retried := steps[0], steps[1]
			if st := panicked.Status(); st.Code != codes.Error || st.Description != `step "risky" panicked: boom in step` {
				t.Errorf("the panicking step's span has status %v %q", st.Code, st.Description)
			}
			var exception string
			for _, ev := range panicked.Events() {
				if ev.Name == "exception" {
					for _, a := range ev.Attributes {
						if a.Key == "exception.message" {
							exception = a.Value.AsString()
						}
					}
				}
			}
			if !strings.Contains(exception, "boom in step") || !strings.Contains(exception, "panicInStep") {
				t.Errorf("the panicking step's span records %q; want the panic and the stack it happened on", exception)
			}
			if st := retried.Status(); st.Code == codes.Error {
				t.Errorf("the retried step's span failed: %q", st.Description)
			}
		})
	}
}
