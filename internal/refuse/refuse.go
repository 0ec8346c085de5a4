// Package refuse is the one rule by which the engine's operator surfaces (the HTTP API and the
// MCP tools, which neither may import from the other) turn an error into the refusal a caller
// reads. An error carrying an X_ code is the caller's to read as it is. One without a code is a
// store's or driver's own error, or a bug: its text may name hosts, users or credentials, so the
// caller is told only that the engine logged it, and the text goes to the log for the operator.
package refuse

import (
	"context"
	"errors"
	"log/slog"
	"slices"

	"github.com/ultimat3/jobs"
)

// Of is the refusal for err, answered within ctx (the caller's request or call). An uncoded err
// is logged on log as "<source>.internal" (or, the caller having left, "<source>.client-gone"
// at debug level) with attrs, slog's alternating keys and values naming what was asked.
func Of(ctx context.Context, log *slog.Logger, source string, err error, attrs ...any) *jobs.Error {
	var e *jobs.Error
	if errors.As(err, &e) {
		return e
	}
	switch {
	case ctx.Err() != nil:
		// The caller left (or cancelled a long-poll): nobody reads this answer.
		log.Debug(source+".client-gone", append(slices.Clip(attrs), "err", err)...)
		return jobs.Wrap(jobs.CodeDraining, err, "the request was cancelled")
	case errors.Is(err, context.DeadlineExceeded):
		// A store call's own deadline ran out: the store is slow or gone, which the caller may
		// retry, unlike a bug.
		return jobs.Wrap(jobs.CodeStoreUnavailable, err, "the store did not answer in time")
	default:
		log.Error(source+".internal", append(slices.Clip(attrs), "err", err)...)
		return jobs.Errorf(jobs.CodeInternal, "internal error; the engine logged it")
	}
}
