package store

import (
	"context"
	"time"
)

// ChildLink says that ChildID is a child run of ParentID: started by the parent's durable call
// Name (jobs.Job.StartChild). A child that is not Detached is cancelled with its parent.
type ChildLink struct {
	ParentID  string
	ChildID   string
	Name      string
	Detached  bool
	CreatedAt time.Time
}

// Children is the parent–child relation of runs. The engine writes a link after the child run
// exists and before the parent's record of the call commits, so a call the history records
// always has its link (a resend writes the same link again: adding is idempotent).
type Children interface {
	// ChildLinkAdd records l unless a link for l.ChildID exists; it returns the link the store
	// holds (a run has at most one parent, the first one recorded).
	ChildLinkAdd(ctx context.Context, l ChildLink) (ChildLink, error)
	// ChildrenOf returns the links of the parent's children, oldest first (CreatedAt, then
	// ChildID).
	ChildrenOf(ctx context.Context, parentID string) ([]ChildLink, error)
	// ParentOf returns the link of a child run to its parent; ok is false for a run that has none.
	ParentOf(ctx context.Context, childID string) (link ChildLink, ok bool, err error)
	// FinishedChildrenOfWaiting returns, at most limit, the links of finished children (completed,
	// failed or cancelled) whose parent holds an open wait for event: the candidates of a parent
	// the engine may not have told (it tells after the child's final commit, and may stop in
	// between). Ordered by parent, then child. A limit of zero or less means no limit: every
	// candidate, on every store (storetest Children/FinishedChildrenOfWaitingLimit).
	FinishedChildrenOfWaiting(ctx context.Context, event string, limit int) ([]ChildLink, error)
}
