package engine

import (
	"context"
	"strings"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// BackfillDeclarations returns the backfills the application declares. It is the seam through
// which the engine learns of backfills that exist but never ran: an in-process app passes
// backfill.Registered; an engine serving remote workers is given what their manifests declare.
type BackfillDeclarations func(ctx context.Context) ([]backfill.Declaration, error)

// maxLedgerScan bounds the rows a projection reads at once.
const maxLedgerScan = 10_000

// BackfillOpen implements frontend.Backfills.
func (e *Engine) BackfillOpen(ctx context.Context, req frontend.BackfillOpenRequest) (frontend.BackfillOpenResponse, error) {
	if req.Name == "" {
		return frontend.BackfillOpenResponse{}, jobs.Errorf(jobs.CodeBadRequest, "backfill open names no backfill")
	}
	if req.Total < -1 {
		return frontend.BackfillOpenResponse{}, jobs.Errorf(jobs.CodeBadRequest, "backfill %q: total %d is negative", req.Name, req.Total)
	}
	for field, v := range map[string]string{"name": req.Name, "checksum": req.Checksum, "appVersion": req.AppVersion} {
		if err := jobs.ValidIdentifier(field, v); err != nil {
			return frontend.BackfillOpenResponse{}, err
		}
	}
	if err := e.checkClaim(ctx, req.Claim, req.Name); err != nil {
		return frontend.BackfillOpenResponse{}, err
	}
	resp := frontend.BackfillOpenResponse{Ledger: true}
	if !req.Force {
		// Only a completed row blocks: a running one is this pass resuming, a failed one an
		// attempt the queue is about to retry.
		done, err := e.store.BackfillList(ctx, store.BackfillFilter{Name: req.Name, Status: store.BackfillCompleted, Limit: 1})
		if err != nil {
			return resp, err
		}
		if len(done) == 1 && done[0].RunID != req.RunID {
			row := rowOf(done[0])
			resp.Completed = &row
			return resp, nil
		}
	}
	prev, err := e.store.BackfillList(ctx, store.BackfillFilter{Name: req.Name, Limit: 1})
	if err != nil {
		return resp, err
	}
	now := e.clock.Now()
	row, adopted, err := e.store.BackfillOpen(ctx, store.Backfill{RunID: req.RunID, Name: req.Name, Checksum: req.Checksum,
		AppVersion: req.AppVersion, Total: req.Total, StartedAt: now, UpdatedAt: now})
	if err != nil {
		return resp, err
	}
	resp.Row, resp.Adopted = rowOf(row), adopted
	if !adopted && len(prev) == 1 && prev[0].Checksum != req.Checksum {
		// A moved checksum warns, never refuses.
		resp.PreviousChecksum = prev[0].Checksum
	}
	return resp, nil
}

// BackfillReport implements frontend.Backfills.
func (e *Engine) BackfillReport(ctx context.Context, req frontend.BackfillReportRequest) error {
	switch req.Status {
	case "", store.BackfillCompleted, store.BackfillFailed:
	default:
		return jobs.Errorf(jobs.CodeBadRequest, "backfill report: status %q is not completed or failed", req.Status)
	}
	if req.Rows < 0 || req.Batches < 0 {
		return jobs.Errorf(jobs.CodeBadRequest, "backfill report: rows and batches must not be negative")
	}
	for field, v := range map[string]string{"cursor": req.Cursor} {
		if err := jobs.ValidIdentifier(field, v); err != nil {
			return err
		}
	}
	if len(req.Error) > 10_000 {
		req.Error = req.Error[:10_000]
	}
	if err := e.checkClaim(ctx, req.Claim, ""); err != nil {
		if req.Status != "" || !e.lateReport(ctx, req) {
			return err
		}
	}
	p := store.BackfillProgress{RunID: req.RunID, Rows: req.Rows, Batches: req.Batches, Cursor: req.Cursor, Now: e.clock.Now()}
	if req.Status == "" {
		return e.store.BackfillUpdate(ctx, p)
	}
	return e.store.BackfillFinish(ctx, store.BackfillFinish{BackfillProgress: p, Status: req.Status, Error: req.Error})
}

// lateReport admits the progress report of a page whose step landed just before the run was
// cancelled: the page is in the history, so its progress belongs in the ledger too. Only the
// last holder (a cancel does not move the fence) may send it, never a finish, and never more
// batches than the history holds.
func (e *Engine) lateReport(ctx context.Context, req frontend.BackfillReportRequest) bool {
	run, err := e.store.RunGet(ctx, req.RunID)
	if err != nil || run.State != store.StateCancelled || run.Fence != req.Fence {
		return false
	}
	events, err := e.History(ctx, req.RunID, 0)
	if err != nil {
		return false
	}
	var batches int64
	for _, ev := range events {
		if ev.Kind != history.KindStepCompleted {
			continue
		}
		if p, err := ev.Decode(); err == nil && strings.HasPrefix(p.(history.StepCompleted).StepName, "batch:") {
			batches++
		}
	}
	return req.Batches <= batches
}

// checkClaim refuses a ledger write from anyone but the worker holding the run under that fence:
// a stale worker's report would otherwise move a row another worker now owns.
func (e *Engine) checkClaim(ctx context.Context, c frontend.Claim, name string) error {
	if c.RunID == "" {
		return jobs.Errorf(jobs.CodeBadRequest, "backfill call names no run")
	}
	if err := jobs.ValidIdentifier("run", c.RunID); err != nil {
		return err
	}
	run, err := e.store.RunGet(ctx, c.RunID)
	if err != nil {
		return err
	}
	if name != "" && run.Job != name {
		return jobs.Errorf(jobs.CodeBadRequest, "run %s is a run of %q, not of backfill %q", c.RunID, run.Job, name)
	}
	switch {
	case run.State == store.StateCancelled:
		return jobs.Errorf(jobs.CodeAborted, "run %s was cancelled", c.RunID)
	case run.State != store.StateRunning || run.Fence != c.Fence || run.WorkerID != c.WorkerID:
		return jobs.Errorf(jobs.CodeJobLeaseLost, "run %s is not held by worker %q under fence %d", c.RunID, c.WorkerID, c.Fence)
	}
	return nil
}

func rowOf(b store.Backfill) frontend.BackfillRow {
	return frontend.BackfillRow{RunID: b.RunID, Name: b.Name, Checksum: b.Checksum, Status: b.Status, AppVersion: b.AppVersion,
		Rows: b.Rows, Batches: b.Batches, Cursor: b.Cursor, Total: b.Total, Error: b.Error, StartedAt: b.StartedAt,
		UpdatedAt: b.UpdatedAt, CompletedAt: b.CompletedAt}
}

// InspectBackfills is the one projection of the ledger every surface reads: `backfill --list`,
// `jobs ls` (the passes in flight), `jobs show` (a run's row), the metrics and the pending
// report. A row still running whose run has ended is reported by its run's state.
func (e *Engine) InspectBackfills(ctx context.Context, f store.BackfillFilter) ([]backfill.Progress, error) {
	switch f.Status {
	case "", backfill.StatusRunning, backfill.StatusCompleted, backfill.StatusFailed:
	default:
		return nil, jobs.Errorf(jobs.CodeBadRequest, "backfill status %q: want running, completed or failed", f.Status)
	}
	limit := store.BackfillLimit(f.Limit)
	q := f
	if f.Status != "" {
		// The status filtered on is the reconciled one, so read the rows unfiltered.
		q.Status, q.Limit = "", maxLedgerScan
	}
	rows, err := e.store.BackfillList(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]backfill.Progress, 0, len(rows))
	for _, r := range rows {
		state := ""
		if r.Status == store.BackfillRunning {
			run, err := e.store.RunGet(ctx, r.RunID)
			if err == nil {
				state = string(run.State)
			} else if !jobs.HasCode(err, jobs.CodeRunNotFound) {
				return nil, err
			}
		}
		p := backfill.NewProgress(rowOf(r), state)
		if f.Status != "" && p.Status != f.Status {
			continue
		}
		out = append(out, p)
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

// DeclaredBackfills returns the application's declarations: the provider's when one is set (an
// app embedding the engine), otherwise those the workers' manifests hold.
func (e *Engine) DeclaredBackfills(ctx context.Context) ([]backfill.Declaration, error) {
	if e.cfg.Backfills == nil {
		return Declared[backfill.Declaration](ctx, e, jobs.DeclareBackfill)
	}
	ds, err := e.cfg.Backfills(ctx)
	if err != nil {
		return nil, jobs.Wrap(jobs.CodeStoreUnavailable, err, "read the declared backfills")
	}
	if ds == nil {
		ds = []backfill.Declaration{}
	}
	return ds, nil
}

// PendingBackfills is declared minus completed, for environment.
func (e *Engine) PendingBackfills(ctx context.Context, environment string) (backfill.Report, error) {
	ds, err := e.DeclaredBackfills(ctx)
	if err != nil {
		return backfill.Report{}, err
	}
	ledger, err := e.InspectBackfills(ctx, store.BackfillFilter{Limit: maxLedgerScan})
	if err != nil {
		return backfill.Report{}, err
	}
	return backfill.Pending(ds, ledger, environment), nil
}
