package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// tracing is an SDK tracer provider recording every span in memory.
type tracing struct {
	tp  *sdktrace.TracerProvider
	rec *tracetest.SpanRecorder
}

func newTracing(t *testing.T) *tracing {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &tracing{tp: tp, rec: rec}
}

// named returns the ended spans whose name is name, in the order they ended.
func (tr *tracing) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tr.rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// await waits until n spans named name ended.
func (tr *tracing) await(t *testing.T, name string, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if got := tr.named(name); len(got) >= n {
			// In the order they started: spans are recorded as they end, and a claim's span
			// may end after the next claim's (its worker goroutine finishes the span after the
			// record that let the next claim happen).
			slices.SortStableFunc(got, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
			return got
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("%d spans named %q after 10s, want %d; ended: %v", len(tr.named(name)), name, n, tr.names())
	return nil
}

func (tr *tracing) names() []string {
	var out []string
	for _, s := range tr.rec.Ended() {
		out = append(out, s.Name())
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// wantChild fails unless child is a child of parent (same trace, parent's span id).
func wantChild(t *testing.T, child sdktrace.ReadOnlySpan, parent trace.SpanContext) {
	t.Helper()
	if child.SpanContext().TraceID() != parent.TraceID() || child.Parent().SpanID() != parent.SpanID() {
		t.Errorf("span %q: trace %s parent %s, want a child of trace %s span %s", child.Name(),
			child.SpanContext().TraceID(), child.Parent().SpanID(), parent.TraceID(), parent.SpanID())
	}
}

type tracedOrder struct{ ID string }

func threeSteps(fail *atomic.Int32, tr *tracing) *jobs.Job[tracedOrder, string] {
	return jobs.MustDefine("checkout", func(o tracedOrder) string { return "checkout:" + o.ID }, jobs.TenantFrom(func(o tracedOrder) string { return "acme" }),
		func(c *jobs.Ctx, o tracedOrder) (string, error) {
			for _, name := range []string{"reserve", "charge", "ship"} {
				if _, err := jobs.Step(c, name, func(ctx context.Context) (string, error) {
					if name == "charge" {
						// The application's own span nests under the step's.
						_, sp := tr.tp.Tracer("app").Start(ctx, "app.charge")
						sp.End()
						if fail != nil && fail.Add(-1) >= 0 {
							return "", errors.New("card declined")
						}
					}
					return name, nil
				}); err != nil {
					return "", err
				}
			}
			return "done", nil
		}, jobs.Retry(jobs.RetryPolicy{Attempts: 3, Backoff: jobs.Fixed, Delay: time.Second}))
}

// An enqueue under a span stamps it on the run; the worker's attempt span is its child, each
// step run live a child of the attempt, and the application's spans in a step children of it.
func TestTraceAttemptAndStepsNestUnderTheEnqueuer(t *testing.T) {
	t.Parallel()
	tr := newTracing(t)
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	job := threeSteps(nil, tr)
	env.Worker(worker.Config{TracerProvider: tr.tp}, job)

	ctx, enq := tr.tp.Tracer("app").Start(t.Context(), "http POST /checkout")
	res, err := job.Enqueue(ctx, env.Engine, tracedOrder{ID: "o1"})
	enq.End()
	if err != nil {
		t.Fatal(err)
	}
	env.Await(res.RunID, store.StateCompleted)
	run, err := env.Engine.GetRun(t.Context(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if want := enq.SpanContext().TraceID().String(); !strings.Contains(run.TraceParent, want) {
		t.Errorf("run's traceparent %q does not name the enqueuer's trace %s", run.TraceParent, want)
	}
	view, err := env.Engine.InspectRun(t.Context(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if view.TraceID != enq.SpanContext().TraceID().String() {
		t.Errorf("run view trace id %q, want %s", view.TraceID, enq.SpanContext().TraceID())
	}

	attempts := tr.await(t, worker.AttemptSpanPrefix+"checkout", 1)
	if len(attempts) != 1 {
		t.Fatalf("%d attempt spans, want 1", len(attempts))
	}
	a := attempts[0]
	wantChild(t, a, enq.SpanContext())
	for key, want := range map[string]string{"jobs.run_id": res.RunID, "jobs.job": "checkout", "jobs.queue": "default",
		"jobs.tenant": "acme", "jobs.attempt": "1", "jobs.fence": "1", "jobs.outcome": "completed"} {
		if got := attr(a, key); got != want {
			t.Errorf("attempt span %s = %q, want %q", key, got, want)
		}
	}
	if a.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("attempt span kind %s, want consumer", a.SpanKind())
	}
	var steps []string
	for _, s := range tr.rec.Ended() {
		if strings.HasPrefix(s.Name(), "jobs.step ") {
			steps = append(steps, s.Name())
			wantChild(t, s, a.SpanContext())
		}
	}
	if fmt.Sprint(steps) != "[jobs.step reserve jobs.step charge jobs.step ship]" {
		t.Errorf("step spans %v, want reserve, charge, ship", steps)
	}
	app := tr.named("app.charge")
	charge := tr.named("jobs.step charge")
	if len(app) != 1 || len(charge) != 1 {
		t.Fatalf("%d app spans, %d charge spans", len(app), len(charge))
	}
	wantChild(t, app[0], charge[0].SpanContext())
}

// A failed attempt and its retry are two attempt spans of the one trace, both children of the
// enqueuer's span; the failure is recorded on the step and the attempt with an error status.
func TestTraceRetryIsASecondAttemptInTheSameTrace(t *testing.T) {
	t.Parallel()
	tr := newTracing(t)
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	var fail atomic.Int32
	fail.Store(1)
	job := threeSteps(&fail, tr)
	env.Worker(worker.Config{TracerProvider: tr.tp}, job)

	ctx, enq := tr.tp.Tracer("app").Start(t.Context(), "enqueue")
	res, err := job.Enqueue(ctx, env.Engine, tracedOrder{ID: "o2"})
	enq.End()
	if err != nil {
		t.Fatal(err)
	}
	env.Await(res.RunID, store.StateDelayed)
	env.Advance(2 * time.Second)
	env.Await(res.RunID, store.StateCompleted)

	attempts := tr.await(t, worker.AttemptSpanPrefix+"checkout", 2)
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(attempts))
	}
	for i, a := range attempts {
		wantChild(t, a, enq.SpanContext())
		if got := attr(a, "jobs.attempt"); got != fmt.Sprint(i+1) {
			t.Errorf("attempt span %d: jobs.attempt %s", i, got)
		}
	}
	if attempts[0].Status().Code != codes.Error || attr(attempts[0], "jobs.outcome") != "failed" {
		t.Errorf("first attempt: status %v outcome %q, want an error, failed", attempts[0].Status(), attr(attempts[0], "jobs.outcome"))
	}
	if attempts[1].Status().Code == codes.Error {
		t.Errorf("second attempt: status %v, want ok", attempts[1].Status())
	}
	charges := tr.named("jobs.step charge")
	if len(charges) != 2 || charges[0].Status().Code != codes.Error || len(charges[0].Events()) == 0 {
		t.Fatalf("charge spans %d; the first must carry the error", len(charges))
	}
	wantChild(t, charges[0], attempts[0].SpanContext())
	wantChild(t, charges[1], attempts[1].SpanContext())
	// reserve completed in attempt 1 and is replayed, not re-emitted, in attempt 2.
	if n := len(tr.named("jobs.step reserve")); n != 1 {
		t.Errorf("%d reserve spans, want 1: a replayed step is not re-emitted", n)
	}
	if got := attr(attempts[1], "jobs.history.calls"); got != "1" {
		t.Errorf("second attempt replayed %q calls, want 1", got)
	}
}

// A run that sleeps has a span per claim, each a child of the enqueuer's; steps after the
// wake-up nest under the second claim's span, whether the worker resumed its parked body or
// replayed the run.
func TestTraceSleepSpansAClaimEach(t *testing.T) {
	t.Parallel()
	for _, sticky := range []int{0, -1} {
		t.Run(fmt.Sprintf("sticky=%d", sticky), func(t *testing.T) {
			t.Parallel()
			tr := newTracing(t)
			env := testenv.Start(t, testenv.Options{Store: memory.New()})
			job := jobs.MustDefine("nap", func(int) string { return "nap" }, jobs.NoTenant[int](),
				func(c *jobs.Ctx, _ int) (int, error) {
					if _, err := jobs.Step(c, "before", func(context.Context) (int, error) { return 1, nil }); err != nil {
						return 0, err
					}
					if err := jobs.SleepFor(c, time.Minute); err != nil {
						return 0, err
					}
					return jobs.Step(c, "after", func(context.Context) (int, error) { return 2, nil })
				})
			env.Worker(worker.Config{TracerProvider: tr.tp, StickyRuns: sticky}, job)
			ctx, enq := tr.tp.Tracer("app").Start(t.Context(), "enqueue")
			res, err := job.Enqueue(ctx, env.Engine, 1)
			enq.End()
			if err != nil {
				t.Fatal(err)
			}
			env.Await(res.RunID, store.StateSuspended)
			env.Advance(2 * time.Minute)
			env.Await(res.RunID, store.StateCompleted)
			claims := tr.await(t, worker.AttemptSpanPrefix+"nap", 2)
			if len(claims) != 2 {
				t.Fatalf("%d claim spans, want 2", len(claims))
			}
			for _, c := range claims {
				wantChild(t, c, enq.SpanContext())
			}
			if attr(claims[0], "jobs.outcome") != "suspended" || attr(claims[1], "jobs.outcome") != "completed" {
				t.Errorf("outcomes %q, %q", attr(claims[0], "jobs.outcome"), attr(claims[1], "jobs.outcome"))
			}
			slept := false
			for _, ev := range claims[0].Events() {
				slept = slept || ev.Name == "jobs.sleep"
			}
			if !slept {
				t.Errorf("the first claim's span has no jobs.sleep event: %v", claims[0].Events())
			}
			before, after := tr.named("jobs.step before"), tr.named("jobs.step after")
			if len(before) != 1 || len(after) != 1 {
				t.Fatalf("%d before, %d after spans; want 1 each", len(before), len(after))
			}
			wantChild(t, before[0], claims[0].SpanContext())
			wantChild(t, after[0], claims[1].SpanContext())
		})
	}
}

// A child enqueued from inside a run joins the parent run's trace: its attempt is a descendant
// of the parent's attempt.
func TestTraceChildEnqueueJoinsTheTrace(t *testing.T) {
	t.Parallel()
	tr := newTracing(t)
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	child := jobs.MustDefine("receipt", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) { return s, nil })
	var childID atomic.Value
	parent := jobs.MustDefine("pay", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) {
			r, err := child.EnqueueFrom(c, "receipt", "r-"+s)
			if err != nil {
				return "", err
			}
			childID.Store(r.RunID)
			return r.RunID, nil
		})
	env.Worker(worker.Config{TracerProvider: tr.tp}, parent, child)
	ctx, enq := tr.tp.Tracer("app").Start(t.Context(), "enqueue")
	res, err := parent.Enqueue(ctx, env.Engine, "p1")
	enq.End()
	if err != nil {
		t.Fatal(err)
	}
	env.Await(res.RunID, store.StateCompleted)
	env.Await(childID.Load().(string), store.StateCompleted)
	pa := tr.await(t, worker.AttemptSpanPrefix+"pay", 1)[0]
	ca := tr.await(t, worker.AttemptSpanPrefix+"receipt", 1)[0]
	wantChild(t, pa, enq.SpanContext())
	wantChild(t, ca, pa.SpanContext())
}

// With no tracer provider configured (the global no-op), runs are stamped with nothing and
// carry on as before.
func TestTraceOffStampsNothing(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	job := threeSteps(nil, newTracing(t))
	env.Worker(worker.Config{}, job)
	res, err := job.Enqueue(t.Context(), env.Engine, tracedOrder{ID: "o3"})
	if err != nil {
		t.Fatal(err)
	}
	run := env.Await(res.RunID, store.StateCompleted)
	if run.TraceParent != "" || run.TraceState != "" {
		t.Errorf("untraced enqueue stamped %q %q", run.TraceParent, run.TraceState)
	}
}

// A traceparent named on the request wins over ctx (an outbox relaying a staged enqueue); a
// malformed one is refused and creates nothing.
func TestTraceExplicitAndMalformed(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	res, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "j", Key: "k1", NoTenant: true,
		TraceParent: tp, TraceState: "vendor=x"})
	if err != nil {
		t.Fatal(err)
	}
	run, err := env.Engine.GetRun(t.Context(), res.RunID)
	if err != nil || run.TraceParent != tp || run.TraceState != "vendor=x" {
		t.Fatalf("run %+v (%v): want the request's trace context", run, err)
	}
	for i, bad := range []jobs.EnqueueRequest{
		{TraceParent: "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, // all-zero trace id
		{TraceParent: "not a traceparent"},
		{TraceParent: tp + strings.Repeat("x", 300)},
		{TraceState: "vendor=x"}, // a tracestate alone
		{TraceParent: tp, TraceState: "=bad=="},
		{TraceParent: tp, TraceState: "v=" + strings.Repeat("a", 600)},
	} {
		bad.Job, bad.Key, bad.NoTenant = "j", fmt.Sprintf("bad-%d", i), true
		if _, err := env.Engine.Enqueue(t.Context(), bad); jobs.CodeOf(err) != jobs.CodeBadRequest {
			t.Errorf("case %d (%q, %q): %v, want X_BAD_REQUEST", i, bad.TraceParent, bad.TraceState, err)
		}
	}
	runs, err := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "j"})
	if err != nil || len(runs) != 1 {
		t.Errorf("%d runs (%v), want only the valid one", len(runs), err)
	}
}
