package replay_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/replay"
)

// switchSampler samples while on is set and drops spans otherwise: one worker's sampler that
// decides each claim's span on its own (a ratio sampler over a run enqueued under no trace, whose
// claims are each a new root, or a rate limit).
type switchSampler struct{ on atomic.Bool }

func (s *switchSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	ts := trace.SpanContextFromContext(p.ParentContext).TraceState()
	if s.on.Load() {
		return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample, Tracestate: ts}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.Drop, Tracestate: ts}
}

func (s *switchSampler) Description() string { return "switch" }

// A body whose first claim was sampled, parked, and resumed on a claim its worker's sampler
// dropped: the current claim's span records nothing, but it is still the current claim. What
// the body does after the wake-up goes under it, as after any resume: a child it starts is
// stamped with its context, and a step's function receives it. They went under the first
// claim's span (recording, ended before the wake-up), so a child's attempts and the
// application's spans in the step were exported hanging off a claim that had ended long before.
func TestAResumeUnderAnUnsampledClaimLeavesTheFirstClaimsSpan(t *testing.T) {
	t.Parallel()
	sampler := &switchSampler{}
	sampler.on.Store(true)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("test")

	kid := jobs.MustDefine("kid3", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) { return s, nil })
	var inStep atomic.Value
	def := jobs.MustDefine("napper3", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, _ string) (string, error) {
			if err := jobs.Sleep(c, "nap", time.Minute); err != nil {
				return "", err
			}
			if _, err := jobs.Step(c, "after", func(ctx context.Context) (int, error) {
				inStep.Store(trace.SpanContextFromContext(ctx))
				return 1, nil
			}); err != nil {
				return "", err
			}
			r, err := kid.StartChild(c, "kid", "k1")
			if err != nil {
				return "", err
			}
			return r.RunID, nil
		})

	input, _ := jobs.Encode("x")
	started := history.New(time.Now(), history.RunStarted{Job: "napper3", Queue: jobs.DefaultQueue, Input: input, Key: "x", NoTenant: true})
	started.Seq = 1
	info := jobs.RunInfo{RunID: "r", Job: "napper3", Attempt: 1}

	ctx1, first := tracer.Start(t.Context(), "jobs.attempt napper3")
	if !first.IsRecording() {
		t.Fatal("the first claim's span does not record")
	}
	rec1 := &tracedRecorder{seq: 1}
	ex, out, err := replay.Start(ctx1, replay.Config{Def: def, Info: info, Recorder: rec1, Park: true}, []history.Event{started})
	if err != nil {
		t.Fatal(err)
	}
	if o := <-out; o.Kind != replay.Suspended || !o.Parked {
		t.Fatalf("first claim: %v (parked %v) %v, want a parked suspension", o.Kind, o.Parked, o.Err)
	}
	first.End()
	t.Cleanup(func() {
		select {
		case <-ex.Exited():
		default:
			ex.Evict()
		}
	})

	sampler.on.Store(false)
	_, second := tracer.Start(t.Context(), "jobs.attempt napper3")
	defer second.End()
	if second.IsRecording() || !second.SpanContext().IsValid() {
		t.Fatal("the second claim's span should be valid and not recording")
	}
	fired := history.New(time.Now(), history.TimerFired{TimerName: "nap"})
	fired.Seq = ex.LastSeq() + 1
	rec2 := &tracedRecorder{seq: fired.Seq}
	out2, ok := ex.Resume([]history.Event{fired}, rec2, info, second)
	if !ok {
		t.Fatal("the parked body was not resumed")
	}
	if o := <-out2; o.Kind != replay.Completed {
		t.Fatalf("second claim: %v %v, want completed", o.Kind, o.Err)
	}

	want := second.SpanContext()
	wantParent, _ := jobs.TraceContext(trace.ContextWithSpan(context.Background(), second))
	firstParent, _ := jobs.TraceContext(ctx1)
	var child *frontend.Command
	for _, r := range rec2.all() {
		for i, c := range r.cmds {
			if c.Kind == frontend.CmdEnqueue {
				child = &r.cmds[i]
			}
		}
		if !r.span.Equal(want) {
			t.Errorf("a record after the resume went under span %s, want the current claim's %s", r.span.SpanID(), want.SpanID())
		}
	}
	if child == nil {
		t.Fatal("the child's start was not recorded")
	}
	if got := child.Effect.TraceParent; got != wantParent {
		which := "another span"
		if got == firstParent {
			which = "the FIRST claim's span, ended before the wake-up"
		}
		t.Errorf("the child's start carries traceparent %q (%s), want the current claim's %q", got, which, wantParent)
	}
	if got, _ := inStep.Load().(trace.SpanContext); !got.Equal(want) {
		which := "another span"
		if got.SpanID() == first.SpanContext().SpanID() {
			which = "the FIRST claim's span, ended before the wake-up"
		}
		t.Errorf("the step's function ran under span %s (%s), want the current claim's %s", got.SpanID(), which, want.SpanID())
	}
	for _, s := range spans.Ended() {
		if s.Name() == replay.StepSpanPrefix+"after" {
			t.Errorf("a step of the unsampled claim was recorded: %q", s.Name())
		}
	}
}
