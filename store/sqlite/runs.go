package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	jobs "github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// scanRun reads a row of runCols, then the row's further columns into extra.
func scanRun(sc interface{ Scan(...any) error }, extra ...any) (store.Run, error) {
	var r store.Run
	var state string
	var noTenant int64
	var leaseUntil, readyAt, createdAt, updatedAt, finishedAt int64
	err := sc.Scan(append([]any{&r.ID, &r.Job, &r.Queue, &r.Key, &r.Tenant, &noTenant, &r.EnqueuedBy,
		blob{&r.Input}, &state, &r.Attempt, &r.Fence, &r.WorkerID, &leaseUntil, &readyAt,
		&r.LastSeq, blob{&r.Result}, &r.ErrorCode, &r.Error, &r.StopReason,
		&createdAt, &updatedAt, &finishedAt, &r.TraceParent, &r.TraceState, &r.Priority}, extra...)...)
	if err != nil {
		return store.Run{}, err
	}
	r.State = store.State(state)
	r.NoTenant = noTenant != 0
	r.LeaseUntil = decTime(leaseUntil)
	r.ReadyAt = decTime(readyAt)
	r.CreatedAt = decTime(createdAt)
	r.UpdatedAt = decTime(updatedAt)
	r.FinishedAt = decTime(finishedAt)
	return r, nil
}

// runArgs are the values of sqlRunInsert, in runCols order.
func runArgs(r store.Run) []any {
	return []any{r.ID, r.Job, r.Queue, r.Key, r.Tenant, r.NoTenant, r.EnqueuedBy,
		blobArg(r.Input), string(r.State), r.Attempt, r.Fence, r.WorkerID, encTime(r.LeaseUntil),
		encTime(r.ReadyAt), r.LastSeq, blobArg(r.Result), r.ErrorCode, r.Error, r.StopReason,
		encTime(r.CreatedAt), encTime(r.UpdatedAt), encTime(r.FinishedAt), r.TraceParent, r.TraceState, r.Priority}
}

func errNotFound(id string) error {
	return jobs.Errorf(jobs.CodeRunNotFound, "run %q not found", id)
}

// getRun reads a run inside a write transaction; ok is false when there is none.
func (t *wtx) getRun(id string) (store.Run, bool, error) {
	r, err := scanRun(t.queryRow(sqlRunGet, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Run{}, false, nil
	}
	return r, err == nil, err
}

// saveRun writes back the mutable columns of r.
func (t *wtx) saveRun(r store.Run) error {
	_, err := t.exec(sqlRunSave, string(r.State), r.Attempt, r.WorkerID, encTime(r.LeaseUntil),
		encTime(r.ReadyAt), r.LastSeq, blobArg(r.Result), r.ErrorCode, r.Error, r.StopReason,
		encTime(r.UpdatedAt), encTime(r.FinishedAt), r.ID)
	return err
}

// saveChanges writes back r, read as was: through sqlRunSaveProgress when no indexed column
// changed, which spares a step the index updates of a state change.
func (t *wtx) saveChanges(was, r store.Run) error {
	if r.State == was.State && r.WorkerID == was.WorkerID && r.LeaseUntil.Equal(was.LeaseUntil) &&
		r.ReadyAt.Equal(was.ReadyAt) && r.FinishedAt.Equal(was.FinishedAt) {
		_, err := t.exec(sqlRunSaveProgress, r.Attempt, r.LastSeq, blobArg(r.Result), r.ErrorCode, r.Error,
			r.StopReason, encTime(r.UpdatedAt), r.ID)
		return err
	}
	return t.saveRun(r)
}

// appendEvents appends evs after r's last event, advancing r.LastSeq, and returns them with
// their seqs (copies: the caller's slices are not kept).
func (t *wtx) appendEvents(r *store.Run, evs ...history.Event) ([]history.Event, error) {
	out := make([]history.Event, 0, len(evs))
	for _, e := range evs {
		r.LastSeq++
		e.Seq = r.LastSeq
		e.At = normTime(e.At)
		e.Data = cloneBytes(e.Data)
		if _, err := t.exec(sqlHistoryInsert, r.ID, e.Seq, string(e.Kind), e.Name, encTime(e.At), blobArg(e.Data)); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// clearWaiting removes every timer and wait of a run.
func (t *wtx) clearWaiting(runID string) error {
	return t.clearSome(runID, true, true)
}

// clearSome is clearWaiting for a caller that read, in this transaction, whether the run has
// timers and waits: a delete that would find nothing is not run.
func (t *wtx) clearSome(runID string, timers, waits bool) error {
	if timers {
		if _, err := t.exec(sqlTimersDeleteRun, runID); err != nil {
			return err
		}
	}
	if waits {
		if _, err := t.exec(sqlWaitsDeleteRun, runID); err != nil {
			return err
		}
	}
	return nil
}

// wake ends r's suspension (a timer fired or an event was delivered): ev, if any, is appended,
// the run's timers and waits go (timers, waits: whether it has some, when the caller read that
// in this transaction), and the row gets the columns a wake-up changes and no others, so the
// indexes on the rest are left alone. WorkerID stays: the worker that parked the run gets first
// call on it for the sticky window. Wake-ups come at whatever rate the runs chose, each a turn
// of the single writer (bench/ANALYSIS.md, "Timer lag in the whole bench").
func (t *wtx) wake(r *store.Run, now time.Time, ev *history.Event, timers, waits bool) ([]history.Event, error) {
	var appended []history.Event
	if ev != nil {
		var err error
		if appended, err = t.appendEvents(r, *ev); err != nil {
			return nil, err
		}
	}
	if err := t.clearSome(r.ID, timers, waits); err != nil {
		return nil, err
	}
	r.State = store.StateReady
	r.ReadyAt = normTime(now)
	r.UpdatedAt = normTime(now)
	r.LeaseUntil = time.Time{}
	if _, err := t.exec(sqlRunWake, nameArgs("now", encTime(r.ReadyAt), "zero", int64(minTime), "last_seq", r.LastSeq, "id", r.ID)...); err != nil {
		return nil, err
	}
	return appended, nil
}

// armTimer stores a timer of a run (replacing one with the same key).
func (t *wtx) armTimer(runID string, tm store.Timer) error {
	var kind, name, at, data any
	if f := tm.Fire; f != nil {
		kind, name, at, data = string(f.Kind), f.Name, encTime(f.At), blobArg(f.Data)
	}
	_, err := t.exec(sqlTimerUpsert, runID, tm.Key, encTime(tm.DueAt), kind, name, at, data)
	return err
}

// RunCreate implements store.Store. A call that cannot create one of its runs (a taken id, a
// state other than ready or delayed) fails whole, with X_INVARIANT: those are the engine's bugs,
// and the batch is one transaction.
func (s *Store) RunCreate(ctx context.Context, runs []store.CreateRunParams) ([]store.CreateRunResult, error) {
	out := make([]store.CreateRunResult, len(runs))
	err := s.write(ctx, "create runs", func(t *wtx) error { return t.createRuns(runs, out) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// createRuns is RunCreate inside a write transaction (shared by a schedule's fire and a deduped
// create); out receives one result per run.
func (t *wtx) createRuns(runs []store.CreateRunParams, out []store.CreateRunResult) error {
	for i, p := range runs {
		// The check and the insert share the write transaction, so no other create can
		// slip between them (an earlier run of this call included); runs_live_key would
		// refuse a second live run anyway.
		live, err := scanRun(t.queryRow(sqlRunLiveByKey, p.Run.Job, p.Run.Tenant, p.Run.Key))
		switch {
		case err == nil:
			out[i] = store.CreateRunResult{Run: live, Deduped: true}
			continue
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		switch {
		case p.Run.ID == "":
			return jobs.Errorf(jobs.CodeInvariant, "create run %d of %d: no id", i+1, len(runs))
		case p.Run.State != store.StateReady && p.Run.State != store.StateDelayed:
			return jobs.Errorf(jobs.CodeInvariant, "create run %s in state %q: want ready or delayed", p.Run.ID, p.Run.State)
		}
		if _, taken, err := t.getRun(p.Run.ID); err != nil {
			return err
		} else if taken {
			return jobs.Errorf(jobs.CodeInvariant, "create run %s: the id is taken", p.Run.ID)
		}
		r := newRun(p.Run)
		if err := t.insertRun(&r, p.Started); err != nil {
			return err
		}
		if p.Timer != nil {
			if err := t.armTimer(r.ID, *p.Timer); err != nil {
				return err
			}
		}
		out[i] = store.CreateRunResult{Run: r}
	}
	return nil
}

// newRun is the row of a run being created. The store owns the claim, the history and the
// outcome fields: a new run has none yet, whatever the caller left in them.
func newRun(in store.Run) store.Run {
	r := in
	if r.Attempt < 1 {
		r.Attempt = 1
	}
	r.Input = cloneBytes(in.Input)
	r.Fence = 0
	r.WorkerID = ""
	r.LeaseUntil = time.Time{}
	r.LastSeq = 0
	r.Result = nil
	r.ErrorCode, r.Error, r.StopReason = "", "", ""
	r.ReadyAt = normTime(r.ReadyAt)
	r.CreatedAt = normTime(r.CreatedAt)
	r.UpdatedAt = r.CreatedAt
	r.FinishedAt = time.Time{}
	return r
}

// insertRun inserts r with its RunStarted event as seq 1.
func (t *wtx) insertRun(r *store.Run, started history.Event) error {
	// The row goes in first (history references it), already naming seq 1 as its last.
	r.LastSeq = 1
	if _, err := t.exec(sqlRunInsert, runArgs(*r)...); err != nil {
		return err
	}
	before := *r
	before.LastSeq = 0
	_, err := t.appendEvents(&before, started)
	return err
}

// RunClaim implements store.Store.
func (s *Store) RunClaim(ctx context.Context, p store.ClaimParams) ([]store.Run, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	limit := p.Total()
	if limit <= 0 || len(p.Queues) == 0 {
		return nil, nil
	}
	workers, err := claimWorkers(p)
	if err != nil {
		return nil, err
	}
	if !p.OldestFirst {
		return s.claimFair(ctx, p, limit, workers)
	}
	var out []store.Run
	err = s.write(ctx, "claim", func(t *wtx) error {
		// Each queue's oldest candidates come from its own index range; merging them here keeps
		// every scan short however many queues a worker polls.
		type cand struct {
			id      string
			readyAt int64
			holder  string
		}
		var cands []cand
		seen := map[string]bool{}
		for _, q := range p.Queues {
			if seen[q] {
				continue
			}
			seen[q] = true
			rows, err := t.query(sqlClaimCandidates, nameArgs("queue", q, "workers", workers,
				"sticky_before", encTime(p.StickyBefore), "limit", limit)...)
			if err != nil {
				return err
			}
			more, err := collect(rows, func(rows *sql.Rows) (cand, error) {
				var c cand
				var worker string
				err := rows.Scan(&c.id, &c.readyAt, &worker)
				c.holder = p.Holder(worker, decTime(c.readyAt))
				return c, err
			})
			if err != nil {
				return err
			}
			cands = append(cands, more...)
		}
		sort.Slice(cands, func(i, j int) bool {
			a, b := cands[i], cands[j]
			return a.readyAt < b.readyAt || (a.readyAt == b.readyAt && a.id < b.id)
		})
		if len(cands) > limit {
			cands = cands[:limit]
		}
		ids, holders := make([]string, len(cands)), make([]string, len(cands))
		for i, c := range cands {
			ids[i], holders[i] = c.id, c.holder
		}
		var err error
		out, err = t.claimRuns(p, ids, holders)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RunHeartbeat implements store.Store.
func (s *Store) RunHeartbeat(ctx context.Context, p store.HeartbeatParams) ([]error, error) {
	out := make([]error, len(p.Leases))
	if len(p.Leases) == 0 {
		return out, nil
	}
	pairs := make([][2]any, len(p.Leases))
	for i, l := range p.Leases {
		pairs[i] = [2]any{l.RunID, l.Fence}
	}
	leases, err := json.Marshal(pairs)
	if err != nil {
		return nil, failed("heartbeat", err)
	}
	err = s.write(ctx, "heartbeat", func(t *wtx) error {
		rows, err := t.query(sqlHeartbeat, nameArgs("lease_until", encTime(p.LeaseUntil), "leases", string(leases))...)
		if err != nil {
			return err
		}
		held, err := collect(rows, func(rows *sql.Rows) (store.Lease, error) {
			var l store.Lease
			return l, rows.Scan(&l.RunID, &l.Fence)
		})
		if err != nil {
			return err
		}
		renewed := map[store.Lease]bool{}
		for _, l := range held {
			renewed[l] = true
		}
		// The leases not renewed say why, read in the same transaction.
		for i, l := range p.Leases {
			if renewed[l] {
				continue
			}
			var state string
			var fence int64
			err := t.queryRow(sqlRunStateFence, l.RunID).Scan(&state, &fence)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				out[i] = errNotFound(l.RunID)
			case err != nil:
				return err
			default:
				out[i] = refusal(l.RunID, store.State(state), fence, l.Fence)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// refusal is why a worker holding fence may not write to a run in state with fence current, or
// nil when it may.
func refusal(runID string, state store.State, current, fence int64) error {
	return store.FenceRefusal(runID, state, current, fence)
}

// RunGet implements store.Store.
func (s *Store) RunGet(ctx context.Context, id string) (store.Run, error) {
	rows, err := s.readQuery(ctx, sqlRunGet, id)
	if err != nil {
		return store.Run{}, failed("get run", err)
	}
	runs, err := collect(rows, scanRuns)
	switch {
	case err != nil:
		return store.Run{}, failed("get run", err)
	case len(runs) == 0:
		return store.Run{}, errNotFound(id)
	}
	return runs[0], nil
}

// scanRuns is scanRun for collect.
func scanRuns(rows *sql.Rows) (store.Run, error) { return scanRun(rows) }

// RunList implements store.Store. Limit ≤ 0 lists every match.
func (s *Store) RunList(ctx context.Context, p store.ListParams) ([]store.Run, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.readQuery(ctx, sqlRunList, nameArgs("queue", p.Queue, "state", string(p.State),
		"job", p.Job, "tenant", p.Tenant, "before", p.Before, "limit", limit)...)
	if err != nil {
		return nil, failed("list runs", err)
	}
	out, err := collect(rows, scanRuns)
	if err != nil {
		return nil, failed("list runs", err)
	}
	return out, nil
}

// RunCancel implements store.Store.
func (s *Store) RunCancel(ctx context.Context, id string, event history.Event, now time.Time) (store.Run, error) {
	var out store.Run
	err := s.write(ctx, "cancel", func(t *wtx) error {
		r, ok, err := t.getRun(id)
		switch {
		case err != nil:
			return err
		case !ok:
			return errNotFound(id)
		case r.State.Finished():
			return jobs.Errorf(jobs.CodeJobNotCancellable, "run %s is already %s", id, r.State)
		}
		if _, err := t.appendEvents(&r, event); err != nil {
			return err
		}
		if err := t.clearWaiting(id); err != nil {
			return err
		}
		// The fence stays: the worker still holding the run is refused by the state
		// (X_ABORTED), which tells it why.
		r.State = store.StateCancelled
		r.WorkerID = ""
		r.LeaseUntil = time.Time{}
		r.UpdatedAt = normTime(now)
		r.FinishedAt = normTime(now)
		out = r
		return t.saveRun(r)
	})
	if err != nil {
		return store.Run{}, err
	}
	return out, nil
}

// RunRetry implements store.Store.
func (s *Store) RunRetry(ctx context.Context, p store.RetryParams) (store.Run, error) {
	var out store.Run
	err := s.write(ctx, "retry", func(t *wtx) error {
		r, ok, err := t.getRun(p.RunID)
		switch {
		case err != nil:
			return err
		case !ok:
			return errNotFound(p.RunID)
		case r.State != store.StateFailed && r.State != store.StateBlocked:
			return jobs.Errorf(jobs.CodeJobNotRetryable, "run %q is %s; only a failed or blocked run is retried", p.RunID, r.State)
		}
		// Reopened, the run holds its idempotency key again; a live run of its tenant created
		// for the same key since it failed holds it now, and two live runs for one key is what
		// the key exists to prevent.
		_, err = scanRun(t.queryRow(sqlRunLiveByKey, r.Job, r.Tenant, r.Key))
		switch {
		case err == nil:
			return store.RetryKeyHeld(p.RunID)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if err := store.StaleRetry(r, p); err != nil {
			return err
		}
		if _, err := t.appendEvents(&r, p.Event); err != nil {
			return err
		}
		if err := t.clearWaiting(r.ID); err != nil {
			return err
		}
		r.Attempt = store.RetriedAttempt(r)
		r.State = store.StateReady
		r.ErrorCode, r.Error, r.StopReason = "", "", ""
		r.WorkerID = ""
		r.LeaseUntil = time.Time{}
		r.ReadyAt = normTime(p.Now)
		r.UpdatedAt = normTime(p.Now)
		r.FinishedAt = time.Time{}
		out = r
		return t.saveRun(r)
	})
	if err != nil {
		return store.Run{}, err
	}
	return out, nil
}

// RunExpireLeases implements store.Store. limit ≤ 0 expires every lapsed lease.
func (s *Store) RunExpireLeases(ctx context.Context, now time.Time, limit int) ([]store.Woken, error) {
	if limit <= 0 {
		limit = -1
	}
	// The timer service asks after every round, many times a second while timers fall due, and
	// a lapsed lease is rare: the read pool answers "none" without a turn of the one writer,
	// which the wake-ups' claims and records queue for. A lease lapsing or renewed after this
	// read is seen by the next call, as it would be if this call had come a moment earlier.
	rows, err := s.readQuery(ctx, sqlLapsedLeases, encTime(now), 1)
	if err != nil {
		return nil, failed("expire leases", err)
	}
	some := rows.Next()
	err = rows.Err()
	_ = rows.Close()
	if err != nil {
		return nil, failed("expire leases", err)
	}
	if !some {
		return nil, nil
	}
	var out []store.Woken
	err = s.write(ctx, "expire leases", func(t *wtx) error {
		rows, err := t.query(sqlLapsedLeases, encTime(now), limit)
		if err != nil {
			return err
		}
		out, err = collect(rows, func(rows *sql.Rows) (store.Woken, error) {
			var w store.Woken
			return w, rows.Scan(&w.RunID, &w.Queue)
		})
		if err != nil {
			return err
		}
		for _, w := range out {
			if _, err := t.exec(sqlExpireLease, nameArgs("zero", int64(minTime), "now", encTime(now), "id", w.RunID)...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// HistoryRead implements store.Store.
func (s *Store) HistoryRead(ctx context.Context, runID string, afterSeq int64, limit int) ([]history.Event, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.readQuery(ctx, sqlHistoryRead, runID, afterSeq, limit)
	if err != nil {
		return nil, failed("read history", err)
	}
	out, err := collect(rows, func(rows *sql.Rows) (history.Event, error) {
		var e history.Event
		var kind string
		var at int64
		err := rows.Scan(&e.Seq, &kind, &e.Name, &at, blob{&e.Data})
		e.Kind = history.Kind(kind)
		e.At = decTime(at)
		return e, err
	})
	if err != nil {
		return nil, failed("read history", err)
	}
	if len(out) == 0 {
		// No events after afterSeq: an unknown run, or a run read to its end.
		ok, err := s.runExists(ctx, runID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errNotFound(runID)
		}
	}
	return out, nil
}

func (s *Store) runExists(ctx context.Context, id string) (bool, error) {
	rows, err := s.readQuery(ctx, sqlRunExists, id)
	if err != nil {
		return false, failed("read run", err)
	}
	found, err := collect(rows, func(rows *sql.Rows) (int, error) {
		var one int
		return one, rows.Scan(&one)
	})
	if err != nil {
		return false, failed("read run", err)
	}
	return len(found) > 0, nil
}

// QueueStats implements store.Store. Counts holds the states a queue has runs in.
func (s *Store) QueueStats(ctx context.Context) ([]store.QueueStats, error) {
	rows, err := s.readQuery(ctx, sqlQueueStats)
	if err != nil {
		return nil, failed("queue stats", err)
	}
	type group struct {
		queue, state string
		n            int
		minReady     int64
	}
	groups, err := collect(rows, func(rows *sql.Rows) (group, error) {
		var g group
		return g, rows.Scan(&g.queue, &g.state, &g.n, &g.minReady)
	})
	if err != nil {
		return nil, failed("queue stats", err)
	}
	var out []store.QueueStats
	for _, g := range groups { // ordered by queue
		if len(out) == 0 || out[len(out)-1].Queue != g.queue {
			out = append(out, store.QueueStats{Queue: g.queue, Counts: map[store.State]int{}})
		}
		qs := &out[len(out)-1]
		qs.Counts[store.State(g.state)] = g.n
		if store.State(g.state) == store.StateReady {
			qs.OldestReady = decTime(g.minReady)
		}
	}
	return out, nil
}

// claimRuns claims the chosen candidates, in order, for p's worker: one statement for them all,
// inside the claim's write transaction (both claim orders end here). The candidates were read
// in this transaction, so each is ready and the statement claims every one.
// claimRuns claims the candidates ids, in claim order, given their holders (store.ClaimParams.
// Holder): each for the share ShareOut gives it, one statement a share; those given none stay
// ready. It returns the runs claimed in claim order.
func (t *wtx) claimRuns(p store.ClaimParams, ids, holders []string) ([]store.Run, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	to := p.ShareOut(holders)
	at := make(map[string]int, len(ids))
	var chosen []string
	for i, id := range ids {
		if to[i] != "" {
			at[id] = len(chosen)
			chosen = append(chosen, id)
		}
	}
	out := make([]store.Run, len(chosen))
	for _, sh := range p.Claimers() {
		var mine []string
		for i, id := range ids {
			if to[i] == sh.WorkerID {
				mine = append(mine, id)
			}
		}
		if len(mine) == 0 {
			continue
		}
		list, err := json.Marshal(mine)
		if err != nil {
			return nil, err
		}
		rows, err := t.query(sqlClaimRuns, nameArgs("worker", sh.WorkerID,
			"lease_until", encTime(p.LeaseUntil), "lease", int64(p.LeaseUntil.Sub(p.Now)), "now", encTime(p.Now),
			"ids", string(list))...)
		if err != nil {
			return nil, err
		}
		claimed, err := collect(rows, scanRuns)
		if err != nil {
			return nil, err
		}
		if len(claimed) != len(mine) {
			return nil, fmt.Errorf("claim: %d of %d chosen runs claimed", len(claimed), len(mine))
		}
		for _, r := range claimed {
			out[at[r.ID]] = r
		}
	}
	return out, nil
}

// claimWorkers is the JSON array of a claim's workers, which its candidate queries take.
func claimWorkers(p store.ClaimParams) (string, error) {
	shares := p.Claimers()
	ws := make([]string, len(shares))
	for i, sh := range shares {
		ws[i] = sh.WorkerID
	}
	b, err := json.Marshal(ws)
	return string(b), err
}
