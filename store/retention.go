package store

import (
	"context"
	"time"
)

// RetentionParams says which finished runs retention may delete. A run is eligible when its
// state's cut-off is set and its FinishedAt is before it, no dedupe id recorded at or after
// DedupeFrom names it, and it is not the child of a parent that is live, blocked or failed (the
// parent, or a failed one once retried, may still wait for it, and a child that finished long
// ago is answered from its row). Live and
// blocked runs are never eligible, whatever the cut-offs say.
type RetentionParams struct {
	// CompletedBefore, FailedBefore and CancelledBefore are the cut-offs per finished state; a
	// zero time keeps every run in that state.
	CompletedBefore time.Time
	FailedBefore    time.Time
	CancelledBefore time.Time
	// DedupeFrom protects the runs that a dedupe id still inside its window names: a resend of
	// that request must get the run back, not a second run.
	DedupeFrom time.Time
	// Limit bounds the runs listed or deleted by one call (≤ 0: 100, at most 10,000).
	Limit int
}

// Before returns the cut-off of state st: zero (keep) for any state but the finished ones.
func (p RetentionParams) Before(st State) time.Time {
	switch st {
	case StateCompleted:
		return p.CompletedBefore
	case StateFailed:
		return p.FailedBefore
	case StateCancelled:
		return p.CancelledBefore
	}
	return time.Time{}
}

// Eligible reports whether r may be deleted under p, apart from the dedupe rule (which needs the
// dedupe ids).
func (p RetentionParams) Eligible(r Run) bool {
	cut := p.Before(r.State)
	return !cut.IsZero() && r.State.Finished() && !r.FinishedAt.IsZero() && r.FinishedAt.Before(cut)
}

// RetentionLimit is the number of runs a retention call with limit handles.
func RetentionLimit(limit int) int {
	if limit <= 0 {
		return 100
	}
	return min(limit, 10_000)
}

// RetentionDeleted is what one RetentionDelete removed.
type RetentionDeleted struct {
	// Runs are the ids of the runs deleted.
	Runs []string
	// Events is how many history events went with them.
	Events int64
}

// Retention deletes finished runs after their retention period, in bounded batches. The engine's
// sweeper lists a batch, archives it if asked to, then deletes it; a run that changed in between
// (an operator retried it) is checked again at delete and kept.
type Retention interface {
	// RetentionCandidates lists up to p.Limit eligible runs, oldest FinishedAt first (then id).
	// It only reads.
	RetentionCandidates(ctx context.Context, p RetentionParams) ([]Run, error)

	// RetentionDelete deletes those of ids that are still eligible under p, with everything that
	// is theirs: history, timers, waits, deliveries, the dedupe ids naming them (which are
	// past their window, or the run would not be eligible) and their link to their parent (a
	// link naming a deleted run as the parent stays with its child). It is one short transaction over at
	// most RetentionLimit(p.Limit) runs; a backend that can skips runs another transaction holds
	// locked rather than waiting for them. Unknown or ineligible ids are ignored. The backfill
	// ledger is not touched: its rows are the record of what passes ran.
	RetentionDelete(ctx context.Context, p RetentionParams, ids []string) (RetentionDeleted, error)
}
