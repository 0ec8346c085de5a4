package frontend

import (
	"context"
	"time"
)

// Backfills is what a backfill's pass needs of the engine: its ledger row. Every call carries the
// claim (run, fence, worker and the claim's lease token), so only the worker holding the run
// writes its row, and every write
// is keyed by the run, so a resend changes nothing twice.
type Backfills interface {
	// BackfillOpen is a pass's first ledger call on every attempt. Unless Force, when another run
	// of Name completed, it answers that row (Completed) and writes nothing: the pass is then
	// skipped. Otherwise it adopts the run's row (a retry) or writes a new running one.
	BackfillOpen(ctx context.Context, req BackfillOpenRequest) (BackfillOpenResponse, error)
	// BackfillReport records a pass's progress after a page (Status ""), or its end (Status
	// "completed" or "failed").
	BackfillReport(ctx context.Context, req BackfillReportRequest) error
}

// Claim identifies a worker's hold on a run.
type Claim struct {
	RunID    string `msgpack:"run_id"`
	Fence    int64  `msgpack:"fence"`
	WorkerID string `msgpack:"worker_id"`
	// LeaseToken is the claim's Task.LeaseToken. Run, fence and worker are shown to any viewer
	// (GET /v1/runs/{id}); the token is not, so it is what proves the caller holds the claim.
	LeaseToken string `msgpack:"lease_token"`
}

// BackfillOpenRequest opens (or adopts) the ledger row of a pass.
type BackfillOpenRequest struct {
	Claim
	Name       string `msgpack:"name"`
	Checksum   string `msgpack:"checksum"`
	AppVersion string `msgpack:"app_version,omitempty"`
	Force      bool   `msgpack:"force,omitempty"`
	// Total is what the backfill's count answered when the pass began; -1 when unknown. An
	// adopted row takes it when it is ≥ 0.
	Total int64 `msgpack:"total"`
}

// BackfillOpenResponse is the row the pass writes to.
type BackfillOpenResponse struct {
	// Ledger is false when the engine keeps no ledger: the pass runs anyway, without bookkeeping.
	Ledger  bool        `msgpack:"ledger"`
	Row     BackfillRow `msgpack:"row"`
	Adopted bool        `msgpack:"adopted,omitempty"`
	// Completed is the newest completed pass of the name, when one blocks this one (no Force).
	Completed *BackfillRow `msgpack:"completed,omitempty"`
	// PreviousChecksum is the checksum of the newest earlier pass when it differs from this
	// one's: a warning, never a refusal.
	PreviousChecksum string `msgpack:"previous_checksum,omitempty"`
}

// BackfillReportRequest reports a pass's progress or end.
type BackfillReportRequest struct {
	Claim
	Rows    int64  `msgpack:"rows"`
	Batches int64  `msgpack:"batches"`
	Cursor  string `msgpack:"cursor,omitempty"`
	// Status is "" for progress, "completed" or "failed" for the end of the pass.
	Status string `msgpack:"status,omitempty"`
	Error  string `msgpack:"error,omitempty"`
}

// BackfillRow is a ledger row as the wire carries it.
type BackfillRow struct {
	RunID       string    `msgpack:"run_id" json:"runId"`
	Name        string    `msgpack:"name" json:"name"`
	Checksum    string    `msgpack:"checksum" json:"checksum"`
	Status      string    `msgpack:"status" json:"status"`
	AppVersion  string    `msgpack:"app_version,omitempty" json:"appVersion,omitempty"`
	Rows        int64     `msgpack:"rows" json:"rows"`
	Batches     int64     `msgpack:"batches" json:"batches"`
	Cursor      string    `msgpack:"cursor,omitempty" json:"cursor,omitempty"`
	Total       int64     `msgpack:"total" json:"total"`
	Error       string    `msgpack:"error,omitempty" json:"error,omitempty"`
	StartedAt   time.Time `msgpack:"started_at" json:"startedAt"`
	UpdatedAt   time.Time `msgpack:"updated_at" json:"updatedAt"`
	CompletedAt time.Time `msgpack:"completed_at,omitempty" json:"completedAt,omitzero"`
}

// ClaimedLedger is the ledger bound to the claim a worker holds on one run. The worker puts one
// in the context of every run it executes (WithLedger), so a pass reaches its row without knowing
// fences; a run executed without one (replay.Check, a custom runtime) finds none and runs its
// pass without bookkeeping.
type ClaimedLedger struct {
	FE Backfills
	// Claim returns the claim the worker holds on the run now.
	Claim func() Claim
}

// Open sends BackfillOpen under the current claim.
func (l *ClaimedLedger) Open(ctx context.Context, req BackfillOpenRequest) (BackfillOpenResponse, error) {
	req.Claim = l.Claim()
	return l.FE.BackfillOpen(ctx, req)
}

// Report sends BackfillReport under the current claim.
func (l *ClaimedLedger) Report(ctx context.Context, req BackfillReportRequest) error {
	req.Claim = l.Claim()
	return l.FE.BackfillReport(ctx, req)
}

type ledgerKey struct{}

// WithLedger returns ctx carrying l.
func WithLedger(ctx context.Context, l *ClaimedLedger) context.Context {
	return context.WithValue(ctx, ledgerKey{}, l)
}

// LedgerFrom returns the ledger ctx carries.
func LedgerFrom(ctx context.Context) (*ClaimedLedger, bool) {
	l, ok := ctx.Value(ledgerKey{}).(*ClaimedLedger)
	return l, ok && l != nil
}
