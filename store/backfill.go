package store

import (
	"context"
	"time"
)

// Backfill statuses: the ledger row of a pass is running while the pass sweeps, completed when
// it swept every row, failed when its last attempt failed (the queue may still retry it).
const (
	BackfillRunning   = "running"
	BackfillCompleted = "completed"
	BackfillFailed    = "failed"
)

// Backfill is one row of the backfill ledger: one pass of a named backfill. A pass is one run, so
// RunID is the row's key: a retried attempt of the run adopts its row, and a forced sweep (a new
// run) writes a new one. The row is a report of the pass, never where a resumed pass restarts
// (that is the run's step checkpoints).
type Backfill struct {
	RunID string
	Name  string
	// Tenant is the tenant a per-tenant backfill's pass sweeps (its run's tenant); "" for a
	// backfill declared for every tenant. A per-tenant backfill keeps a ledger per (Name, Tenant):
	// one tenant's completed pass says nothing of another's rows. Set when the row is inserted and
	// never changed.
	Tenant     string
	Checksum   string
	Status     string
	AppVersion string
	Rows       int64
	Batches    int64
	// Cursor is the last page's cursor, as JSON text, for people.
	Cursor string
	// Total is what the backfill's count answered when the pass began; -1 when it declares no
	// count.
	Total       int64
	Error       string
	StartedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt time.Time
}

// BackfillFilter selects ledger rows; empty fields select all.
type BackfillFilter struct {
	Name string
	// Tenant selects the passes of one tenant. NoTenant selects the passes of no tenant (a
	// backfill declared for every tenant) and is ignored when Tenant is set; neither selects
	// every tenant's. The gate asks for exactly one of them: the passes of (name, tenant).
	Tenant   string
	NoTenant bool
	Status   string
	RunID    string
	// Newest keeps, of the rows the other fields select, only the newest (by StartedAt, then
	// RunID) of each pass scope: of each (Name, Tenant) with NewestPerTenant, of each Name with
	// NewestPerName. With Status, the newest pass of that status. The pending report asks it per
	// name, so a backfill's passes are read however many newer passes other backfills (or its
	// other tenants) have. "" keeps every row.
	Newest string
	// Limit bounds the rows returned (≤ 0: 100).
	Limit int
}

// BackfillFilter.Newest's scopes.
const (
	NewestPerTenant = "tenant" // the newest row of each (Name, Tenant)
	NewestPerName   = "name"   // the newest row of each Name, whatever its tenant
)

// BackfillProgress is a pass's progress after a page.
type BackfillProgress struct {
	RunID   string
	Rows    int64
	Batches int64
	Cursor  string
	Now     time.Time
	// Rewind sets the counts and cursor of a running row even when they are fewer than the
	// row's: a retry from an earlier page discarded the pages recorded since, so the row goes
	// back to what the replayed pages hold (the engine's BackfillOpen, once, as it adopts the
	// row). Without it a BackfillUpdate never moves a row backwards. BackfillFinish ignores it.
	Rewind bool
}

// BackfillFinish ends a pass: Status is completed or failed.
type BackfillFinish struct {
	BackfillProgress
	Status string
	Error  string
}

// Backfills is the backfill ledger. Every write is keyed by the pass's run id and idempotent, so
// a worker that resends one (its answer was lost) changes nothing twice.
type Backfills interface {
	// BackfillOpen inserts b as a running row, or, when the run already has a row, adopts it: a
	// failed or running row becomes running again, keeping its StartedAt, counts, cursor and
	// tenant (and taking b.Total when it is ≥ 0); a completed row is returned unchanged. adopted
	// reports an existing row.
	BackfillOpen(ctx context.Context, b Backfill) (row Backfill, adopted bool, err error)
	// BackfillUpdate records progress on a running row. A report older than the row's (fewer
	// batches) is ignored, so a late resend never rewinds it, unless p.Rewind. No row, or a row
	// not running, is not an error: the row is a report.
	BackfillUpdate(ctx context.Context, p BackfillProgress) error
	// BackfillFinish marks the row completed or failed, with its final counts. A completed row is
	// final: it is never turned back to failed or running.
	BackfillFinish(ctx context.Context, p BackfillFinish) error
	// BackfillList returns the rows f selects, newest StartedAt first (then RunID, descending),
	// at most BackfillLimit(f.Limit).
	BackfillList(ctx context.Context, f BackfillFilter) ([]Backfill, error)
}

// BackfillLimit is the number of rows a BackfillList with limit returns: 100 when limit ≤ 0, at
// most 10,000.
func BackfillLimit(limit int) int {
	if limit <= 0 {
		return 100
	}
	return min(limit, 10_000)
}
