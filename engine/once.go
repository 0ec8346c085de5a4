package engine

import (
	"context"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// DefaultDedupeRetention is how long the engine remembers which request (jobs.EnqueueRequest's
// DedupeID) created which run. A resend later than this is a new request.
const DefaultDedupeRetention = 7 * 24 * time.Hour

// dedupePruneEvery bounds how often an enqueue with a dedupe id also prunes the expired ids.
const dedupePruneEvery = time.Hour

// TxCreate writes a prepared run inside a transaction the caller holds (see EnqueueIn); dedupeID
// is the request's DedupeID, "" when it has none.
type TxCreate func(ctx context.Context, dedupeID string, p store.CreateRunParams) (store.CreateRunResult, error)

type txCreateKey struct{}

// EnqueueIn is Enqueue with the run written by create, in the caller's transaction, instead of
// by the engine's own: same validation, same ids, same RunStarted, same idempotency. The run
// exists if and only if that transaction commits; the engine's pollers learn of it from the
// store's notification at commit, or from their fallback poll.
func (e *Engine) EnqueueIn(ctx context.Context, create TxCreate, req jobs.EnqueueRequest) (jobs.EnqueueResult, error) {
	if create == nil {
		return jobs.EnqueueResult{}, jobs.Errorf(jobs.CodeInvariant, "enqueue in a transaction: no create")
	}
	return e.Enqueue(context.WithValue(ctx, txCreateKey{}, create), req)
}

// createFor writes the prepared run p of req: in a caller's transaction (EnqueueIn), once per
// dedupe id, or through the batching create loop.
func (e *Engine) createFor(ctx context.Context, req jobs.EnqueueRequest, p store.CreateRunParams) (store.CreateRunResult, error) {
	if create, ok := ctx.Value(txCreateKey{}).(TxCreate); ok {
		return create(ctx, req.DedupeID, p)
	}
	if req.DedupeID == "" {
		return e.create(ctx, p)
	}
	e.pruneDedupe(ctx, p.Run.CreatedAt)
	return e.store.RunCreateOnce(ctx, store.OnceParams{ID: req.DedupeID, Create: p})
}

// pruneDedupe forgets dedupe ids older than the retention, at most once per dedupePruneEvery:
// the ids are written only by enqueues that carry one, so those enqueues pay for their upkeep.
func (e *Engine) pruneDedupe(ctx context.Context, now time.Time) {
	last := e.dedupePruned.Load()
	if last != 0 && now.UnixNano()-last < int64(dedupePruneEvery) {
		return
	}
	if !e.dedupePruned.CompareAndSwap(last, now.UnixNano()) {
		return // another enqueue is pruning
	}
	keep := e.cfg.DedupeRetention
	if keep <= 0 {
		keep = DefaultDedupeRetention
	}
	if _, err := e.store.DedupePrune(context.WithoutCancel(ctx), now.Add(-keep)); err != nil {
		e.log.Warn("jobs.dedupe.prune-failed", "err", err)
	}
}
