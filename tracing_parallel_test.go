package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// A parallel step (jobs.Go) run live is a step run live: it has its "jobs.step <name>" span, a
// child of the claim's, and its function gets the span's context, so the application's spans
// nest under it. A parallel step that fails or panics ends its span failed, with the error or
// the panic. A parallel step the retry replays from the history is not re-emitted.
func TestTraceParallelStepSpans(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		fail   func() error
		opts   []jobs.Option
		status string // the failed span's status description, a prefix of it
	}{
		{"error", func() error { return errors.New("card declined") }, nil, "card declined"},
		{"panic", func() error { panicInStep(); return nil }, nil, `step "flaky" panicked: boom in step`},
		{"panic under a stepTimeout", func() error { panicInStep(); return nil },
			[]jobs.Option{jobs.StepTimeout(time.Minute)}, `step "flaky" panicked: boom in step`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := newTracing(t)
			env := testenv.Start(t, testenv.Options{Store: memory.New()})
			var calls atomic.Int32
			opts := append([]jobs.Option{jobs.Retry(jobs.RetryPolicy{Attempts: 2, Backoff: jobs.Fixed, Delay: time.Second})}, tc.opts...)
			job := jobs.MustDefine("par-traced", func(int) string { return "par-traced" }, jobs.NoTenant[int](),
				func(c *jobs.Ctx, _ int) (int, error) {
					ok := jobs.Go(c, "ok", func(ctx context.Context) (int, error) {
						_, sp := tr.tp.Tracer("app").Start(ctx, "app.ok")
						sp.End()
						return 1, nil
					})
					flaky := jobs.Go(c, "flaky", func(context.Context) (int, error) {
						if calls.Add(1) == 1 {
							return 0, tc.fail()
						}
						return 2, nil
					})
					if err := jobs.AwaitAll(c, ok, flaky); err != nil {
						return 0, err
					}
					return 3, nil
				}, opts...)
			env.Worker(worker.Config{TracerProvider: tr.tp}, job)
			ctx, enq := tr.tp.Tracer("app").Start(t.Context(), "enqueue")
			res, err := job.Enqueue(ctx, env.Engine, 1)
			enq.End()
			if err != nil {
				t.Fatal(err)
			}
			awaitAttempt(t, env, res.RunID, 1)
			env.Advance(time.Second)
			env.Await(res.RunID, store.StateCompleted)

			claims := tr.await(t, worker.AttemptSpanPrefix+"par-traced", 2)
			first, second := claims[0], claims[1]
			flakies := tr.await(t, "jobs.step flaky", 2)
			failed, retried := flakies[0], flakies[1]
			wantChild(t, failed, first.SpanContext())
			wantChild(t, retried, second.SpanContext())
			if st := failed.Status(); st.Code != codes.Error || !strings.HasPrefix(st.Description, tc.status) {
				t.Errorf("the failed parallel step's span: status %v %q, want an error %q", st.Code, st.Description, tc.status)
			}
			if len(failed.Events()) == 0 || failed.Events()[0].Name != "exception" {
				t.Errorf("the failed parallel step's span records no error: %v", failed.Events())
			}
			if st := retried.Status(); st.Code == codes.Error {
				t.Errorf("the retried parallel step's span failed: %q", st.Description)
			}
			if got := attr(retried, "jobs.call"); got != "flaky" {
				t.Errorf("the parallel step's span: jobs.call %q, want flaky", got)
			}
			// ok ran live in the first claim and was replayed in the second: one span.
			oks := tr.await(t, "jobs.step ok", 1)
			app := tr.await(t, "app.ok", 1)
			if len(oks) != 1 || len(app) != 1 {
				t.Fatalf("%d ok spans, %d app spans; want 1 each: a replayed parallel step is not re-emitted", len(oks), len(app))
			}
			wantChild(t, oks[0], first.SpanContext())
			wantChild(t, app[0], oks[0].SpanContext())
		})
	}
}

// A body parked in the sticky cache and resumed on a later claim makes its durable calls under
// the current claim's span, not the first claim's (ended before the wake-up), which the body's
// own context keeps: a parallel step's span and the application's spans in it, a child started
// with Call (whose attempts join the trace under the current claim), the wait for that child,
// and a sleep's span event.
func TestTraceDurableCallsAfterAResumeUseTheCurrentClaim(t *testing.T) {
	t.Parallel()
	tr := newTracing(t)
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	child := jobs.MustDefine("resumed-kid", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) { return s, nil })
	parent := jobs.MustDefine("resumed-parent", func(int) string { return "resumed-parent" }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, _ int) (int, error) {
			if err := jobs.SleepFor(c, time.Minute); err != nil {
				return 0, err
			}
			f := jobs.Go(c, "fan", func(ctx context.Context) (int, error) {
				_, sp := tr.tp.Tracer("app").Start(ctx, "app.fan")
				sp.End()
				return 1, nil
			})
			if _, err := f.Await(c); err != nil {
				return 0, err
			}
			if _, err := child.Call(c, "kid", "k1"); err != nil {
				return 0, err
			}
			return 1, jobs.Sleep(c, "nap-again", time.Minute)
		})
	w := env.Worker(worker.Config{TracerProvider: tr.tp}, parent, child) // sticky by default
	ctx, enq := tr.tp.Tracer("app").Start(t.Context(), "enqueue")
	res, err := parent.Enqueue(ctx, env.Engine, 1)
	enq.End()
	if err != nil {
		t.Fatal(err)
	}
	env.Await(res.RunID, store.StateSuspended)
	testenv.AwaitParked(t, w, 1) // the wake-up resumes the parked body
	env.Advance(2 * time.Minute)
	// The second claim: the parallel step, the child, the wait for it (answered at once or
	// after a suspension of its own), then the second sleep, whose wake-up is due once it is
	// recorded.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if env.Await(res.RunID, store.StateSuspended, store.StateCompleted).State == store.StateCompleted {
			t.Fatal("the run completed before its second sleep")
		}
		timers := 0
		for _, ev := range env.History(res.RunID) {
			if ev.Kind == history.KindTimerStarted {
				timers++
			}
		}
		if timers == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not reach its second sleep: %v", testenv.Kinds(env.History(res.RunID)))
		}
	}
	env.Advance(2 * time.Minute)
	env.Await(res.RunID, store.StateCompleted)

	claims := tr.await(t, worker.AttemptSpanPrefix+"resumed-parent", 2)
	first, second := claims[0], claims[1]
	if !hasEvent(second, "jobs.resumed") {
		t.Fatalf("the second claim did not resume the parked body (its span's events: %v); the test needs a resume", eventNames(second))
	}
	fan := tr.await(t, "jobs.step fan", 1)[0]
	app := tr.await(t, "app.fan", 1)[0]
	kid := tr.await(t, worker.AttemptSpanPrefix+"resumed-kid", 1)[0]
	wantChild(t, fan, second.SpanContext())
	wantChild(t, app, fan.SpanContext())
	wantChild(t, kid, second.SpanContext())
	if kid.Parent().SpanID() == first.SpanContext().SpanID() {
		t.Errorf("the child's attempt hangs off the first claim's span, ended before the wake-up")
	}
	// The span events after the resume are on the claims that made them: the wait for the
	// child, and the second sleep (on the second claim, or a later one when the wait
	// suspended); the first claim has its own sleep's alone.
	for i, cl := range claims {
		if n, want := len(eventNamed(cl, "jobs.wait")), 0; i == 0 && n != want {
			t.Errorf("the first claim's span has %d jobs.wait events, want none: the wait for the child came after the resume", n)
		}
	}
	if n := len(eventNamed(first, "jobs.sleep")); n != 1 {
		t.Errorf("%d jobs.sleep events on the first claim, want 1: the second sleep was made under a later claim", n)
	}
	waits, sleeps := 0, 0
	for _, cl := range claims[1:] {
		waits += len(eventNamed(cl, "jobs.wait"))
		sleeps += len(eventNamed(cl, "jobs.sleep"))
	}
	if waits != 1 || sleeps != 1 {
		t.Errorf("the later claims' spans have %d jobs.wait and %d jobs.sleep events, want 1 each", waits, sleeps)
	}
}

// A wait for a child (Call, or StartChild then Wait) is a wait like WaitForEvent's: a jobs.wait
// event on the claim's span, naming the call, the event (jobs:child) and the child run.
func TestTraceAwaitChildIsAWaitEvent(t *testing.T) {
	t.Parallel()
	tr := newTracing(t)
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	child := jobs.MustDefine("awaited-kid", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) { return s, nil })
	var childID atomic.Value
	parent := jobs.MustDefine("awaiting-parent", func(int) string { return "awaiting-parent" }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, _ int) (string, error) {
			r, err := child.StartChild(c, "kid", "k1")
			if err != nil {
				return "", err
			}
			childID.Store(r.RunID)
			return r.Wait(c)
		})
	env.Worker(worker.Config{TracerProvider: tr.tp}, parent, child)
	ctx, enq := tr.tp.Tracer("app").Start(t.Context(), "enqueue")
	res, err := parent.Enqueue(ctx, env.Engine, 1)
	enq.End()
	if err != nil {
		t.Fatal(err)
	}
	env.Await(res.RunID, store.StateCompleted)
	claim := tr.await(t, worker.AttemptSpanPrefix+"awaiting-parent", 1)[0]
	waits := eventNamed(claim, "jobs.wait")
	if len(waits) != 1 {
		t.Fatalf("%d jobs.wait events on the claim that waited for its child, want 1; its events: %v", len(waits), eventNames(claim))
	}
	for key, want := range map[string]string{"jobs.call": "wait:kid", "jobs.event": jobs.ChildEvent,
		"jobs.child_run_id": childID.Load().(string)} {
		if got := eventAttr(waits[0].Attributes, key); got != want {
			t.Errorf("the jobs.wait event's %s = %q, want %q", key, got, want)
		}
	}
}

func hasEvent(s sdktrace.ReadOnlySpan, name string) bool { return len(eventNamed(s, name)) > 0 }

func eventNamed(s sdktrace.ReadOnlySpan, name string) []sdktrace.Event {
	var out []sdktrace.Event
	for _, ev := range s.Events() {
		if ev.Name == name {
			out = append(out, ev)
		}
	}
	return out
}

func eventNames(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, ev := range s.Events() {
		out = append(out, ev.Name)
	}
	return out
}

func eventAttr(attrs []attribute.KeyValue, key string) string {
	for _, kv := range attrs {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}
