package jobs

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// A run carries the W3C trace context (traceparent, tracestate) it was enqueued under: the
// worker opens each attempt's span as a child of it, so the request that enqueued a run and the
// run's attempts, however much later, read as one trace. The context always travels in the W3C
// format, whatever propagator the application installs globally: it is stored on the run and
// must mean the same thing to every worker that reads it.
var w3c propagation.TraceContext

// TraceContext returns the traceparent and tracestate of the span ctx carries, or "" when it
// carries none (tracing off, or a context that never saw a span).
func TraceContext(ctx context.Context) (parent, state string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	parent, state = c["traceparent"], c["tracestate"]
	if len(state) > maxTraceState {
		// The W3C specification lets a participant drop a tracestate it cannot carry; the
		// traceparent alone still joins the trace.
		state = ""
	}
	return parent, state
}

// ContextWithTrace returns ctx carrying the remote span context of a stored traceparent and
// tracestate, for a span to be started as its child. A parent that is "" or malformed leaves ctx
// as it is.
func ContextWithTrace(ctx context.Context, parent, state string) context.Context {
	if parent == "" {
		return ctx
	}
	c := propagation.MapCarrier{"traceparent": parent}
	if state != "" {
		c["tracestate"] = state
	}
	return w3c.Extract(ctx, c)
}

// maxTraceParent bounds a traceparent: version 00 is 55 bytes; later versions may append fields.
const maxTraceParent = 256

// maxTraceState is the W3C limit (32 members of at most 256 bytes each would be more, but the
// specification lets a vendor drop what passes 512 bytes).
const maxTraceState = 512

// validTrace refuses a trace context that is set but malformed: it would be stored for the
// run's lifetime and every attempt would start a fresh trace from it.
func validTrace(parent, state string) error {
	if parent == "" {
		if state != "" {
			return Errorf(CodeBadRequest, "tracestate is set without a traceparent")
		}
		return nil
	}
	if len(parent) > maxTraceParent {
		return Errorf(CodeBadRequest, "traceparent is %d bytes; the limit is %d", len(parent), maxTraceParent)
	}
	if !trace.SpanContextFromContext(ContextWithTrace(context.Background(), parent, "")).IsValid() {
		return Errorf(CodeBadRequest, "traceparent %q is not a W3C traceparent (version-traceid-spanid-flags)", parent)
	}
	// The parser reads a later version's first four fields and skips whatever follows the flags
	// unread, but the engine stores the whole value, shows it in the run's view and hands it to
	// every worker: a NUL or invalid UTF-8 there failed the insert on Postgres (an internal
	// error, not a refusal), and a control character or an escape sequence was stored as it came
	// and printed. Every field W3C defines is lowercase hex between dashes, and so must be the
	// rest (TestATraceparentsExtraFieldsAreHeldToItsGrammar).
	for i := 0; i < len(parent); i++ {
		if c := parent[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') && c != '-' {
			return Errorf(CodeBadRequest, "traceparent %q is not a W3C traceparent: its fields are lowercase hex joined by '-'", parent)
		}
	}
	if len(state) > maxTraceState {
		return Errorf(CodeBadRequest, "tracestate is %d bytes; the limit is %d", len(state), maxTraceState)
	}
	if _, err := trace.ParseTraceState(state); err != nil {
		return Errorf(CodeBadRequest, "tracestate is malformed: %v", err)
	}
	return nil
}
