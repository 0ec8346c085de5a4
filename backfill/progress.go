package backfill

import (
	"time"

	"github.com/ultimat3/jobs/frontend"
)

// Progress is the one projection of a ledger row that every surface reads (`backfill --list`,
// `jobs ls`, `jobs show`, the metrics, the gate and Pending), so no two of them can report a
// different number.
type Progress struct {
	frontend.BackfillRow
	// Status is the row's status reconciled with its run: a row left running by a run that has
	// since failed, been cancelled or blocked reads failed; one whose run completed reads
	// completed.
	Status string `json:"status"`
	// RowsPerSecond is the pass's average rate from its start to its last report.
	RowsPerSecond float64 `json:"rowsPerSecond"`
	// Left and ETA are set when the backfill declared a count (Total ≥ 0) and the pass is
	// running.
	Left *int64        `json:"left,omitempty"`
	ETA  time.Duration `json:"eta,omitempty"`
}

// Statuses a Progress can have.
const (
	StatusRunning   = "running"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
)

// NewProgress projects a ledger row whose run is in runState ("" when unknown).
func NewProgress(row frontend.BackfillRow, runState string) Progress {
	p := Progress{BackfillRow: row, Status: row.Status}
	if p.Status == StatusRunning {
		switch runState {
		case "failed", "cancelled", "blocked":
			p.Status = StatusFailed
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
		if p.RowsPerSecond > 0 {
			p.ETA = time.Duration(float64(left) / p.RowsPerSecond * float64(time.Second)).Round(time.Second)
		}
	}
	return p
}
