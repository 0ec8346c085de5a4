package replay

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ultimat3/jobs"
)

// Tracing. The worker opens one span per claim (the attempt's, "jobs.attempt <job>") and hands
// it in through the parent context of Start, or with Resume for a parked body continuing on a
// new claim. Within it, each step run live gets its own span ("jobs.step <name>"), whose context
// is the one the step's function receives, so the application's spans nest under the step.
//
// A step replayed from the history is not re-emitted: it ran, and was traced, in the attempt
// that recorded it; emitting it again on every replay would multiply it in every trace and
// show durations of work that did not happen. The attempt span counts what it replayed
// (jobs.history.calls). Sleeps and waits are events on the attempt span, not spans: their
// duration is the suspension, which no process spends.
//
// Everything here is skipped unless the attempt's span is recording, so with no tracer
// configured a step costs one context lookup more and allocates nothing.

// StepSpanPrefix names a live step's span: "jobs.step <name>".
const StepSpanPrefix = "jobs.step "

// Attribute keys on the spans and span events.
const (
	AttrCall         = attribute.Key("jobs.call")
	AttrEvent        = attribute.Key("jobs.event")
	AttrHistoryCalls = attribute.Key("jobs.history.calls")
	// AttrChildRunID names the child run a jobs.wait event awaits (AwaitChild).
	AttrChildRunID = attribute.Key("jobs.child_run_id")
)

// recording reports whether the current claim's span records (a tracer is configured and the
// trace is sampled).
func (e *Execution) recording() bool { return e.span != nil && e.span.IsRecording() }

// spanContext returns c carrying the current claim's span. After a resume, the body's own
// context still carries the first claim's span; durable calls use the current one.
func (e *Execution) spanContext(c *jobs.Ctx) context.Context {
	cur := e.span
	if cur == nil {
		// The current claim's span does not record (e.span holds only one that does), but it is
		// still the current claim: child runs and the application's spans in a step after a
		// resume go under it, as under a recording one. Taking c's span here put them under
		// the FIRST claim's, sampled and long ended, when the resumed claim was not sampled
		// (TestAResumeUnderAnUnsampledClaimLeavesTheFirstClaimsSpan). The span is in the
		// records' context, which a resume replaces; until then that context is the body's own
		// without its cancellation, whose span is c's. That is told by comparing the two rather
		// than by a lookup, which allocates through a context.WithoutCancel at the top, on
		// every untraced live step's path.
		if e.recCtx == context.WithoutCancel(e.ctx) {
			return c
		}
		cur = trace.SpanFromContext(e.recCtx)
		if !cur.SpanContext().IsValid() {
			return c
		}
	}
	// Compared by their span contexts: a provider's span type need not be comparable with ==.
	if trace.SpanFromContext(c).SpanContext().Equal(cur.SpanContext()) {
		return c
	}
	return trace.ContextWithSpan(c, cur)
}

// startStep opens a live step's span; span is nil when the claim's span does not record, and ctx
// is then c carrying the current claim's span (c itself unless a resume changed the claim).
func (e *Execution) startStep(c *jobs.Ctx, name string) (context.Context, trace.Span) {
	if !e.recording() {
		return e.spanContext(c), nil
	}
	return e.span.TracerProvider().Tracer(tracerName).Start(e.spanContext(c), StepSpanPrefix+name,
		trace.WithAttributes(AttrCall.String(name)))
}

const tracerName = "github.com/ultimat3/jobs"

// endStep ends a step's span, with its error when it failed.
func endStep(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// endStepPanicked ends the span of a step whose function panicked: the error recorded is the
// panic with the stack it happened on, the status says which step panicked with what.
func endStepPanicked(span trace.Span, p *stepPanic) {
	span.RecordError(p)
	span.SetStatus(codes.Error, fmt.Sprintf("step %q panicked: %v", p.step, p.value))
	span.End()
}

// spanEvent adds an event to the current claim's span.
func (e *Execution) spanEvent(name string, attrs ...attribute.KeyValue) {
	if e.recording() {
		e.span.AddEvent(name, trace.WithAttributes(attrs...))
	}
}
