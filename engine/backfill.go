package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/freetext"
	"github.com/ultimat3/jobs/store"
)

// BackfillDeclarations returns the backfills the application declares. It is the seam through
// which the engine learns of backfills that exist but never ran: an in-process app passes
// backfill.Declared; an engine serving remote workers is given what their manifests declare.
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
	run, err := e.checkClaim(ctx, req.Claim, req.Name)
	if err != nil {
		return frontend.BackfillOpenResponse{}, err
	}
	// The pass's scope is its run's tenant: a per-tenant backfill's ledger is per (name, tenant),
	// so one tenant's completed pass does not make another tenant's a no-op. It is read from the
	// run, not from the request, so a worker that predates the tenant keeps a per-tenant ledger
	// too; a backfill declared for every tenant runs under no tenant and keeps one per name.
	scope := store.BackfillFilter{Name: req.Name, Tenant: run.Tenant, NoTenant: run.Tenant == ""}
	resp := frontend.BackfillOpenResponse{Ledger: true}
	if !req.Force {
		// Only a completed row blocks: a running one is this pass resuming, a failed one an
		// attempt the queue is about to retry.
		done := scope
		done.Status, done.Limit = store.BackfillCompleted, 1
		rows, err := e.store.BackfillList(ctx, done)
		if err != nil {
			return resp, err
		}
		if len(rows) == 1 && rows[0].RunID != req.RunID {
			row := rowOf(rows[0])
			resp.Completed = &row
			return resp, nil
		}
	}
	// One live pass per (name, tenant), whatever key its run was enqueued under. The backfill's
	// own key (Declaration.Key) makes a second enqueue the live pass, but a schedule's run is keyed
	// schedule@occurrence, a manual trigger's @manual@, and the CLI takes --key: each of those
	// started a second pass beside the live one, over the same rows. A pass whose run is not the
	// live one is refused here, before it writes a row. A key mismatch alone is no reason: a
	// schedule firing a backfill while no pass is live is the way to run one nightly.
	if other, ok, err := e.otherLivePass(ctx, scope, req.RunID, false); err != nil {
		return resp, err
	} else if ok {
		return resp, livePassTaken(req.Name, run, other)
	}
	newest := scope
	newest.Limit = 1
	prev, err := e.store.BackfillList(ctx, newest)
	if err != nil {
		return resp, err
	}
	now := e.clock.Now()
	row, adopted, err := e.store.BackfillOpen(ctx, store.Backfill{RunID: req.RunID, Name: req.Name, Tenant: run.Tenant,
		Checksum: req.Checksum, AppVersion: req.AppVersion, Total: req.Total, StartedAt: now, UpdatedAt: now})
	if err != nil {
		return resp, err
	}
	if !adopted {
		// Two passes opening at once may both have found none live above. Each looks again once
		// its row is in: one that finds another running row of a live run gives way, and its row
		// says why. So at most one of them sweeps (should both look before either gives way,
		// both are refused, and the next enqueue sweeps).
		if other, ok, err := e.otherLivePass(ctx, scope, req.RunID, true); err != nil {
			return resp, err
		} else if ok {
			refused := livePassTaken(req.Name, run, other)
			if err := e.store.BackfillFinish(ctx, store.BackfillFinish{BackfillProgress: store.BackfillProgress{RunID: req.RunID, Now: now},
				Status: store.BackfillFailed, Error: refused.Error()}); err != nil {
				// Read failed anyway once its run has failed with the refusal (InspectBackfills).
				e.log.Warn("jobs.backfill.settle-failed", "backfill", req.Name, "run", req.RunID, "err", err)
			}
			return resp, refused
		}
	}
	if adopted && row.Status == store.BackfillRunning && row.Batches > 0 {
		row = e.rewindToReplay(ctx, row, now)
	}
	resp.Row, resp.Adopted = rowOf(row), adopted
	if !adopted && len(prev) == 1 && prev[0].Checksum != req.Checksum {
		// A moved checksum warns, never refuses.
		resp.PreviousChecksum = prev[0].Checksum
	}
	return resp, nil
}

// livePassScan bounds the failed rows otherLivePass looks at: a pass whose attempt failed and
// waits for its retry is among the newest rows of its scope, since no pass opens beside it.
const livePassScan = 100

// otherLivePass answers another pass of scope whose run is live (not finished): a row running,
// or (unless runningOnly) failed by an attempt whose run waits for its retry, among the newest
// livePassScan failed rows. A run blocked on a replay that diverged is live too: it waits for a
// retry, and holds its key.
func (e *Engine) otherLivePass(ctx context.Context, scope store.BackfillFilter, runID string, runningOnly bool) (store.Run, bool, error) {
	statuses := []string{store.BackfillRunning, store.BackfillFailed}
	if runningOnly {
		statuses = statuses[:1]
	}
	for _, status := range statuses {
		q := scope
		q.Status, q.Limit = status, livePassScan
		if status == store.BackfillRunning {
			q.Limit = maxLedgerScan
		}
		rows, err := e.store.BackfillList(ctx, q)
		if err != nil {
			return store.Run{}, false, err
		}
		for _, r := range rows {
			if r.RunID == runID {
				continue
			}
			run, err := e.store.RunGet(ctx, r.RunID)
			switch {
			case jobs.HasCode(err, jobs.CodeRunNotFound):
				continue // retention deleted it: long finished
			case err != nil:
				return store.Run{}, false, err
			case !run.State.Finished():
				return run, true, nil
			}
		}
	}
	return store.Run{}, false, nil
}

// livePassTaken is the refusal of a pass whose backfill (for its tenant) has another live pass.
func livePassTaken(name string, run, live store.Run) error {
	scope := ""
	if run.Tenant != "" {
		scope = fmt.Sprintf(" for tenant %q", run.Tenant)
	}
	return jobs.Errorf(jobs.CodeBackfillLive, "backfill %q already has a live pass%s: run %s (key %q, %s). One pass of a backfill sweeps at a time "+
		"per tenant, whatever key its run was enqueued under, so this run (key %q) is refused: wait for that pass, or cancel it, and enqueue again",
		name, scope, live.ID, live.Key, live.State, run.Key)
}

// rewindToReplay sets an adopted running row back to the pages its run's history holds, when it
// counts more: a retry from an earlier page (RetryRequest.FromStep) discards the pages recorded
// since and sweeps them again, and the row kept the discarded sweep's counts, which no later
// report could lower (the ledger never moves a row to fewer batches), so it showed the old sweep
// to the end. Rows and cursor come from the last page kept; when its checkpoint cannot be read
// here (a codec sealed it), only the batches go back, and the pass's first live page reports the
// rest. It answers the row as written; a failure is logged and changes nothing.
func (e *Engine) rewindToReplay(ctx context.Context, r store.Backfill, now time.Time) store.Backfill {
	batches, last, err := e.replayedPages(ctx, r.RunID)
	if err != nil || batches >= r.Batches {
		return r
	}
	p := store.BackfillProgress{RunID: r.RunID, Rows: r.Rows, Batches: batches, Cursor: r.Cursor, Now: now, Rewind: true}
	var cp backfill.Checkpoint
	switch {
	case batches == 0:
		p.Rows, p.Cursor = 0, ""
	case jobs.Decode(last, &cp) == nil:
		p.Rows, p.Cursor = cp.Rows, cp.LedgerCursor()
	}
	if err := e.store.BackfillUpdate(ctx, p); err != nil {
		e.log.Warn("jobs.backfill.rewind-failed", "backfill", r.Name, "run", r.RunID, "err", err)
		return r
	}
	r.Rows, r.Batches, r.Cursor, r.UpdatedAt = p.Rows, p.Batches, p.Cursor, now
	return r
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
	// The cursor is text for people: cut, never a reason to refuse the report. Refused, a pass
	// whose key is a long text (a URL, an object-store path) left its row at 0 rows for good.
	req.Cursor = backfill.CutCursorText(req.Cursor)
	req.Error = freetext.Cut(req.Error, 10_000) // a byte cut could split a rune, which Postgres refuses
	if run, err := e.checkClaim(ctx, req.Claim, ""); err != nil {
		if !jobs.HasCode(err, jobs.CodeAborted) {
			return err // only a cancelled run's last holder, with its token, is heard below
		}
		switch {
		case req.Status == "" && e.lateReport(ctx, run, req):
		case req.Status != "" && run.State == store.StateCancelled && run.Fence == req.Fence:
			// The end of a pass whose run was cancelled, from its last holder (a cancel does not
			// move the fence): recorded failed, with the cancel's reason, so the row is final when
			// the cancel lands. Without it the row stayed running, read failed only while the run
			// was there to reconcile it with, and running again for good once retention deleted
			// the run.
			return e.cancelledPass(ctx, run, req)
		default:
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
// last holder (a cancel does not move the fence) may send it, and never more batches than the
// history holds; its end goes through cancelledPass.
func (e *Engine) lateReport(ctx context.Context, run store.Run, req frontend.BackfillReportRequest) bool {
	if run.State != store.StateCancelled || run.Fence != req.Fence { // run: as checkClaim read it
		return false
	}
	batches, _, err := e.replayedPages(ctx, req.RunID)
	return err == nil && req.Batches <= batches
}

// replayedPages counts the pages a run's history holds as its replay reads them, and answers the
// last one's recorded checkpoint (nil without a page): a retry from a step discards the steps
// recorded from it on (RunRetried.FromSeq), as the replay's fold does, though they stay in the
// log.
func (e *Engine) replayedPages(ctx context.Context, runID string) (int64, []byte, error) {
	events, err := e.History(ctx, runID, 0)
	if err != nil {
		return 0, nil, err
	}
	var pages []history.Event
	for _, ev := range events {
		switch ev.Kind {
		case history.KindStepCompleted:
			if strings.HasPrefix(ev.Name, "batch:") {
				pages = append(pages, ev)
			}
		case history.KindRunRetried:
			p, err := ev.Decode()
			if err != nil {
				return 0, nil, err
			}
			if from := p.(history.RunRetried).FromSeq; from > 0 {
				kept := pages[:0]
				for _, pg := range pages {
					if pg.Seq < from {
						kept = append(kept, pg)
					}
				}
				pages = kept
			}
		}
	}
	if len(pages) == 0 {
		return 0, nil, nil
	}
	p, err := pages[len(pages)-1].Decode()
	if err != nil {
		return 0, nil, err
	}
	return int64(len(pages)), p.(history.StepCompleted).Output, nil
}

// cancelledPass records the end its last holder sends for a pass whose run was cancelled: failed
// whatever status it asks for (the run's outcome is the cancel, and a completed row would make
// the name a no-op for a pass whose run never completed), with the cancel's reason, and with the
// pass's counts when the history holds that many pages (the row never counts a page the history
// does not).
func (e *Engine) cancelledPass(ctx context.Context, run store.Run, req frontend.BackfillReportRequest) error {
	p := store.BackfillProgress{RunID: run.ID, Rows: req.Rows, Batches: req.Batches, Cursor: req.Cursor, Now: e.clock.Now()}
	if batches, _, err := e.replayedPages(ctx, run.ID); err != nil || req.Batches > batches {
		p.Rows, p.Batches, p.Cursor = 0, 0, "" // fewer batches than the row's: its counts stay
	}
	return e.store.BackfillFinish(ctx, store.BackfillFinish{BackfillProgress: p, Status: store.BackfillFailed,
		Error: e.cancelledError(ctx, run)})
}

// cancelledError is what a cancelled pass's row says of its end: X_RUN_CANCELLED and the reason
// the cancel gave (its RunCancelled event: the run's row does not keep it).
func (e *Engine) cancelledError(ctx context.Context, run store.Run) string {
	return cancelledText(run.ID, e.cancelReason(ctx, run.ID))
}

func cancelledText(runID, reason string) string {
	// Engine.Cancel refuses a reason over 1,000 bytes, not UTF-8 or holding NUL, but a reason
	// recorded before it did is still in the history: cut and cleaned, it never fails the
	// ledger's write (Postgres refuses NUL and invalid UTF-8 in text).
	if reason = freetext.Cut(reason, 1000); reason != "" {
		return jobs.Errorf(jobs.CodeRunCancelled, "the pass's run %s was cancelled: %s", runID, reason).Error()
	}
	return jobs.Errorf(jobs.CodeRunCancelled, "the pass's run %s was cancelled", runID).Error()
}

// checkClaim refuses a ledger write from anyone but the worker holding the run under that fence:
// a stale worker's report would otherwise move a row another worker now owns. The claim's lease
// token is checked first, as for a record: run, fence and worker are shown to any viewer, so
// without it any worker credential could write another worker's row (mark its pass completed,
// and so skip every later pass and pass the migrations gated on it). It answers the run whenever
// it could read it, refused or not; a refused token reads nothing.
func (e *Engine) checkClaim(ctx context.Context, c frontend.Claim, name string) (store.Run, error) {
	if c.RunID == "" {
		return store.Run{}, jobs.Errorf(jobs.CodeBadRequest, "backfill call names no run")
	}
	if err := jobs.ValidIdentifier("run", c.RunID); err != nil {
		return store.Run{}, err
	}
	if err := e.checkLease(ctx, c.RunID, c.Fence, c.WorkerID, c.LeaseToken); err != nil {
		return store.Run{}, err
	}
	run, err := e.store.RunGet(ctx, c.RunID)
	if err != nil {
		return store.Run{}, err
	}
	if name != "" && run.Job != name {
		return run, jobs.Errorf(jobs.CodeBadRequest, "run %s is a run of %q, not of backfill %q", c.RunID, run.Job, name)
	}
	switch {
	case run.State == store.StateCancelled:
		return run, jobs.Errorf(jobs.CodeAborted, "run %s was cancelled", c.RunID)
	case run.State != store.StateRunning || run.Fence != c.Fence || run.WorkerID != c.WorkerID:
		return run, jobs.Errorf(jobs.CodeJobLeaseLost, "run %s is not held by worker %q under fence %d", c.RunID, c.WorkerID, c.Fence)
	}
	return run, nil
}

func rowOf(b store.Backfill) frontend.BackfillRow {
	return frontend.BackfillRow{RunID: b.RunID, Name: b.Name, Checksum: b.Checksum, Status: b.Status, AppVersion: b.AppVersion,
		Rows: b.Rows, Batches: b.Batches, Cursor: b.Cursor, Total: b.Total, Error: b.Error, StartedAt: b.StartedAt,
		UpdatedAt: b.UpdatedAt, CompletedAt: b.CompletedAt}
}

// InspectBackfills is the one projection of the ledger every surface reads: `backfill --list`,
// `jobs ls` (the passes in flight), `jobs show` (a run's row), the metrics and the pending
// report. A row still running whose run has ended is reported by its run's state, and written so
// (settleFromRun): a run that completed or failed, or was cancelled, can never report its end
// any more. One whose run no longer exists is written failed.
//
// A status asked for is the reconciled one, read in the store, never among a window of the
// newest rows: the rows the store holds running (reconciled, and written so when their run
// ended), then the rows it holds in the status asked for. A pass in flight behind any number of
// newer passes is still in flight on every surface.
func (e *Engine) InspectBackfills(ctx context.Context, f store.BackfillFilter) ([]backfill.Progress, error) {
	switch f.Status {
	case "", backfill.StatusRunning, backfill.StatusCompleted, backfill.StatusFailed:
	default:
		return nil, jobs.Errorf(jobs.CodeBadRequest, "backfill status %q: want running, completed or failed", f.Status)
	}
	limit := store.BackfillLimit(f.Limit)
	if f.Status == "" {
		rows, err := e.store.BackfillList(ctx, f)
		if err != nil {
			return nil, err
		}
		return e.reconcile(ctx, rows)
	}
	// A row running in the store may read completed or failed (its run ended); a completed or
	// failed one reads as it is. The running rows are few: each is written final when its run
	// has ended, by the read below, the pass's own end or the retention sweep.
	q := f
	q.Status, q.Limit, q.Newest = store.BackfillRunning, maxLedgerScan, ""
	rows, err := e.store.BackfillList(ctx, q)
	if err != nil {
		return nil, err
	}
	out, err := e.reconcile(ctx, rows)
	if err != nil {
		return nil, err
	}
	if f.Status != backfill.StatusRunning {
		q.Status, q.Limit, q.Newest = f.Status, limit, f.Newest
		more, err := e.store.BackfillList(ctx, q)
		if err != nil {
			return nil, err
		}
		ps, err := e.reconcile(ctx, more)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	out = slices.DeleteFunc(out, func(p backfill.Progress) bool { return p.Status != f.Status })
	return newestFirst(out, f.Newest, limit), nil
}

// reconcile projects rows, each running one reconciled with its run (settleFromRun).
func (e *Engine) reconcile(ctx context.Context, rows []store.Backfill) ([]backfill.Progress, error) {
	out := make([]backfill.Progress, 0, len(rows))
	for _, r := range rows {
		state := ""
		if r.Status == store.BackfillRunning {
			run, err := e.store.RunGet(ctx, r.RunID)
			switch {
			case err == nil:
				state = string(run.State)
				r = e.settleFromRun(ctx, r, run)
			case jobs.HasCode(err, jobs.CodeRunNotFound):
				// Gone (retention deleted it): "" would read running for good, in flight on
				// every surface and never pending again.
				state = backfill.RunDeleted
				r = e.settlePass(ctx, r, store.BackfillFailed, "", r.UpdatedAt)
			default:
				return nil, err
			}
		}
		p := backfill.NewProgress(rowOf(r), state)
		p.Tenant = r.Tenant
		out = append(out, p)
	}
	return out, nil
}

// newestFirst orders passes as BackfillList does (newest start first, then run id descending),
// keeps the first of each run, with newest only the first of each scope (store.BackfillFilter's
// Newest), and at most limit of them.
func newestFirst(ps []backfill.Progress, newest string, limit int) []backfill.Progress {
	slices.SortStableFunc(ps, func(a, b backfill.Progress) int {
		if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(b.RunID, a.RunID)
	})
	type scope struct{ name, tenant string }
	runs, scopes := map[string]bool{}, map[scope]bool{}
	out := ps[:0]
	for _, p := range ps {
		k := scope{p.Name, p.Tenant}
		if newest == store.NewestPerName {
			k.tenant = ""
		}
		if runs[p.RunID] || (newest != "" && scopes[k]) {
			continue
		}
		runs[p.RunID], scopes[k] = true, true
		out = append(out, p)
		if len(out) == limit {
			break
		}
	}
	return out
}

// settleFromRun writes the running row r of a pass as its finished run ended, and answers the
// row as written; a run not finished leaves it as it is. A pass reports its own end, but the
// report can be lost (its worker died, the ledger was away as the run completed), and the run's
// state then says it: written down, the row survives the run's deletion by retention, where a
// completed pass read from a deleted run would turn failed and its name pending again.
func (e *Engine) settleFromRun(ctx context.Context, r store.Backfill, run store.Run) store.Backfill {
	if r.Status != store.BackfillRunning {
		return r
	}
	switch run.State {
	case store.StateCancelled:
		return e.settlePass(ctx, r, store.BackfillFailed, e.cancelledError(ctx, run), run.FinishedAt)
	case store.StateCompleted:
		return e.settlePass(ctx, r, store.BackfillCompleted, "", run.FinishedAt)
	case store.StateFailed:
		return e.settlePass(ctx, r, store.BackfillFailed, run.ErrorCode+": "+run.Error, run.FinishedAt)
	}
	return r
}

// settlePass writes status (completed or failed) on the running row of a pass whose run can
// never end it: a run that finished without its pass reporting the end (settleFromRun), or a
// run retention deleted. The run's end is final, so the row is final too. The write is
// bookkeeping the read found missing: one that fails is logged and the projection reads the
// same anyway. errText "" of a failed row is what NewProgress says of a run that is gone. It
// answers the row as written.
func (e *Engine) settlePass(ctx context.Context, r store.Backfill, status, errText string, at time.Time) store.Backfill {
	if status == store.BackfillFailed && errText == "" {
		errText = backfill.NewProgress(frontend.BackfillRow{Status: store.BackfillRunning}, backfill.RunDeleted).Error
	}
	if at.Before(r.UpdatedAt) {
		at = r.UpdatedAt
	}
	err := e.store.BackfillFinish(ctx, store.BackfillFinish{BackfillProgress: store.BackfillProgress{RunID: r.RunID,
		Rows: r.Rows, Batches: r.Batches, Cursor: r.Cursor, Now: at}, Status: status, Error: errText})
	if err != nil {
		e.log.Warn("jobs.backfill.settle-failed", "backfill", r.Name, "run", r.RunID, "err", err)
		return r
	}
	r.Status, r.Error, r.UpdatedAt = status, errText, at
	if status == store.BackfillCompleted {
		r.CompletedAt = at
	}
	return r
}

// settleCancelledPass writes the ledger row of a cancelled run's pass failed when the cancel
// lands, with the cancel's reason, so that the row is final at once, not at the next read. A
// pass that is running still reports its end after this, with its own count (a finish
// overwrites a failed row). A run that is no pass has no row: one read by run id.
func (e *Engine) settleCancelledPass(ctx context.Context, run store.Run, reason string) {
	rows, err := e.store.BackfillList(ctx, store.BackfillFilter{RunID: run.ID, Status: store.BackfillRunning, Limit: 1})
	if err != nil {
		e.log.Warn("jobs.backfill.settle-failed", "run", run.ID, "err", err) // read again, and settled, by InspectBackfills
		return
	}
	if len(rows) == 1 {
		// The reason is the cancel's own: no history read for it.
		e.settlePass(context.WithoutCancel(ctx), rows[0], store.BackfillFailed, cancelledText(run.ID, reason), run.FinishedAt)
	}
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
	ledger, err := e.pendingLedger(ctx, ds)
	if err != nil {
		return backfill.Report{}, err
	}
	return backfill.Pending(ds, ledger, environment), nil
}

// pendingLedger reads the passes backfill.Pending judges ds by, newest first: for each declared
// name, the newest pass of each tenant (its state, its checksum) and the newest completed one of
// each tenant (a completed pass makes it completed), read per name in the store; and, for the
// orphaned names, the newest pass of each name in the ledger. Read as the newest 10,000 rows of
// every backfill together, a completed pass behind 10,000 newer ones (a per-tenant sweep writes a
// row per tenant) read pending, and `--all --write` took it again. (A per-tenant backfill is read
// for its 10,000 most recently swept tenants.)
func (e *Engine) pendingLedger(ctx context.Context, ds []backfill.Declaration) ([]backfill.Progress, error) {
	out, err := e.InspectBackfills(ctx, store.BackfillFilter{Newest: store.NewestPerName, Limit: maxLedgerScan})
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, d := range ds {
		if names[d.Name] {
			continue
		}
		names[d.Name] = true
		for _, status := range []string{"", store.BackfillCompleted} {
			ps, err := e.InspectBackfills(ctx, store.BackfillFilter{Name: d.Name, Status: status, Newest: store.NewestPerTenant, Limit: maxLedgerScan})
			if err != nil {
				return nil, err
			}
			out = append(out, ps...)
		}
	}
	return newestFirst(out, "", len(out)), nil
}
