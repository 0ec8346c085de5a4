package backfill

import (
	"math"
	"time"

	"github.com/ultimat3/jobs/frontend"
)

// Progress is the one projection of a ledger row that every surface reads (`backfill --list`,
// `jobs ls`, `jobs show`, the metrics, the gate and Pending), so no two of them can report a
// different number.
type Progress struct {
	frontend.BackfillRow
	// Tenant is the tenant of a per-tenant backfill's pass (its run's); "" for a backfill
	// declared AllTenants. A per-tenant backfill's ledger, gate and pending state are per
	// (Name, Tenant).
	Tenant string `json:"tenant,omitempty"`
	// Status is the row's status reconciled with its run: a row left running by a run that has
	// since failed, been cancelled or blocked, or that no longer exists (RunDeleted), reads
	// failed; one whose run completed reads completed.
	Status string `json:"status"`
	// RowsPerSecond is the pass's average rate from its start to its last report.
	RowsPerSecond float64 `json:"rowsPerSecond"`
	// Left and ETA are set when the backfill declared a count (Total ≥ 0) and the pass is
	// running.
	Left *int64 `json:"left,omitempty"`
	// ETA is zero when it cannot be estimated: no row is done yet, so there is no rate (Left is
	// then above zero), or nothing is left (Left is zero). Show it only when it is above zero,
	// and "-" (or "unknown" beside a Left above zero) otherwise, never as "0s". It is at most
	// MaxETA, however slow the pass.
	ETA time.Duration `json:"eta,omitempty"`
}

// MaxETA bounds an ETA: a pass so slow that its rows left would outlast a time.Duration reads
// this, rather than a duration that overflowed to a negative one.
const MaxETA = time.Duration(math.MaxInt64 / int64(time.Second) * int64(time.Second))

// Statuses a Progress can have.
const (
	StatusRunning   = "running"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
)

// RunDeleted is the run state NewProgress is given for a row whose run no longer exists:
// retention deleted it. Such a run can never report the pass's end, so a row it left running
// reads failed.
const RunDeleted = "deleted"

// NewProgress projects a ledger row whose run is in runState ("" when unknown, RunDeleted when
// the run is gone).
func NewProgress(row frontend.BackfillRow, runState string) Progress {
	p := Progress{BackfillRow: row, Status: row.Status}
	if p.Status == StatusRunning {
		switch runState {
		case "failed", "cancelled", "blocked":
			p.Status = StatusFailed
		case RunDeleted:
			// Without this, a row whose run retention deleted would read running for good: in
			// flight on every surface, and never pending again.
			p.Status = StatusFailed
			if p.Error == "" {
				p.Error = "the pass's run no longer exists (retention deleted it) and it never recorded its end"
			}
		case "completed":
			p.Status = StatusCompleted
		}
	}
	if secs := row.UpdatedAt.Sub(row.StartedAt).Seconds(); secs > 0 && row.Rows > 0 {
		p.RowsPerSecond = float64(row.Rows) / secs
	}
	if row.Total >= 0 && p.Status == StatusRunning {
		left := max(row.Total-row.Rows, 0)
		p.Left = &left
		p.ETA = eta(left, p.RowsPerSecond)
	}
	return p
}

// eta is how long left rows take at perSecond, to the second: zero when there is no rate yet
// (unknown) or nothing left, and at most MaxETA. The seconds are compared as a float before the
// conversion, which past about 292 years overflows to a negative duration.
func eta(left int64, perSecond float64) time.Duration {
	if left <= 0 || !(perSecond > 0) || math.IsInf(perSecond, 0) {
		return 0
	}
	secs := math.Ceil(float64(left) / perSecond)
	if secs >= float64(MaxETA/time.Second) {
		return MaxETA
	}
	return time.Duration(secs) * time.Second
}
