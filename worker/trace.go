package worker

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
)

// AttemptSpanPrefix names a claim's span: "jobs.attempt <job>". One span per claim: an attempt
// that sleeps and is woken on a later claim has a span per claim, each a child of the enqueuer's
// span, so every slice of work a worker did shows where it ran; a retry is a new claim too.
const AttemptSpanPrefix = "jobs.attempt "

// Attributes of the attempt span.
const (
	AttrRunID   = attribute.Key("jobs.run_id")
	AttrJob     = attribute.Key("jobs.job")
	AttrQueue   = attribute.Key("jobs.queue")
	AttrTenant  = attribute.Key("jobs.tenant")
	AttrAttempt = attribute.Key("jobs.attempt")
	AttrFence   = attribute.Key("jobs.fence")
	AttrWorker  = attribute.Key("jobs.worker")
	AttrOutcome = attribute.Key("jobs.outcome")
	AttrBy      = attribute.Key("jobs.enqueued_by")
)

const tracerName = "github.com/ultimat3/jobs/worker"

func (w *Worker) newTracer() trace.Tracer {
	tp := w.cfg.TracerProvider
	if tp == nil {
		// The global provider forwards to whatever the application installs, even later; until
		// then its spans are no-ops.
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// attemptSpanOptions is made once: a variadic option list built in the call escaped into the
// tracer and was allocated on every claim, a span recorded or not.
var attemptSpanOptions = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}

// startAttempt opens the claim's span as a child of the trace context the run was enqueued
// under.
func (w *Worker) startAttempt(t frontend.Task) trace.Span {
	parent := jobs.ContextWithTrace(context.Background(), t.TraceParent, t.TraceState)
	_, span := w.tracer.Start(parent, AttemptSpanPrefix+t.Job, attemptSpanOptions...)
	if span.IsRecording() {
		span.SetAttributes(AttrRunID.String(t.RunID), AttrJob.String(t.Job), AttrQueue.String(t.Queue),
			AttrAttempt.Int(t.Attempt), AttrFence.Int64(t.Fence), AttrWorker.String(w.cfg.ID))
		if t.Tenant != "" {
			span.SetAttributes(AttrTenant.String(t.Tenant))
		}
		if t.EnqueuedBy != "" {
			span.SetAttributes(AttrBy.String(t.EnqueuedBy))
		}
	}
	return span
}

// withSpan puts the claim's span in the body's context, so the application's own spans nest
// under it. A span that neither records nor names a trace adds nothing and is left out.
func withSpan(ctx context.Context, span trace.Span) context.Context {
	if span == nil || (!span.IsRecording() && !span.SpanContext().IsValid()) {
		return ctx
	}
	return trace.ContextWithSpan(ctx, span)
}

// endAttempt ends the claim's span with its outcome; err is the attempt's failure, if any.
func endAttempt(span trace.Span, outcome string, err error) {
	if span.IsRecording() {
		span.SetAttributes(AttrOutcome.String(outcome))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}
