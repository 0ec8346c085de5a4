package api

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Trace context over HTTP: the Client sends the caller's current span as W3C traceparent and
// tracestate headers, and the Server reads them into the request's context, so an enqueue over
// the API is stamped with the remote caller's trace exactly as an in-process enqueue is stamped
// with its caller's. W3C always, whatever global propagator the application installs: the
// engine and its clients are separate programs and must agree without configuration.
//
// A header that is absent or malformed is ignored (as the W3C specification asks), never
// refused: tracing is an observer and must not fail a request.

var w3c propagation.TraceContext

// injectTrace adds the span ctx carries to h; nothing when it carries none.
func injectTrace(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		w3c.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// traced reports whether a call under ctx carries the caller's span (injectTrace would set it).
func traced(ctx context.Context) bool { return trace.SpanContextFromContext(ctx).IsValid() }

// extractTrace returns r with the caller's span context in its context, when it sent one.
func extractTrace(r *http.Request) *http.Request {
	if r.Header.Get("traceparent") == "" {
		return r
	}
	ctx := w3c.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return r
	}
	return r.WithContext(ctx)
}
