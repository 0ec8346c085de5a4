package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// RunApply is the group-commit path: one transaction for the whole batch, two round trips
// whatever its size.
//
//  1. BEGIN; the advisory locks of the event names the batch's waits name (ascending); every run
//     of the batch locked FOR UPDATE in id order, read fresh; and, for each wait, its lookback
//     query, which runs after the locks in the pipeline and so reads in a snapshot taken after
//     them.
//  2. In Go, each mutation is checked on its own against its run's row as the earlier mutations
//     of the batch left it (state running, same fence), and a refused one changes nothing.
//  3. The writes of every accepted mutation, each kind as one multi-row statement (history
//     INSERT, runs UPDATE, timers upsert, deliveries), then COMMIT. A completed step costs one
//     history row and one run row in these statements.
//
// The advisory lock of an event name is held from before the lookback query to the commit, and
// RunPublish holds the same lock from before it reads the waits to its commit. So either the
// publish committed first and the lookback query sees the event, or this commit comes first and
// the publish sees the registered wait: the event is delivered exactly once.
func (s *Store) RunApply(ctx context.Context, ms []store.Mutation) ([]store.MutationResult, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	if stepsOnly(ms) {
		return s.applySteps(ctx, ms)
	}
	var ids []string
	var locks []int64
	waitsOfRun := map[string]int{}
	for _, m := range ms {
		ids = append(ids, m.RunID)
		if m.Wait != nil {
			locks = append(locks, s.eventLock(m.Wait.Event))
			waitsOfRun[m.RunID]++
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	slices.Sort(locks)
	locks = slices.Compact(locks)

	t, err := s.begin(ctx, "run apply")
	if err != nil {
		return nil, err
	}
	defer t.release()

	// Round trip 1: lock and read.
	runs := make(map[string]*store.Run, len(ids))
	found := make([][]lookbackEvent, len(ms))
	b := t.batch()
	for _, k := range locks {
		b.Queue(s.q(stmtLock), k)
	}
	b.Queue(s.q(stmtRunsLock), ids).Query(func(rows pgx.Rows) error { return collectRuns(rows, runs, nil) })
	for i, m := range ms {
		if m.Wait == nil {
			continue
		}
		// A run with several waits in the batch needs as many candidates: each takes the
		// earliest one the batch has not delivered to it yet.
		var qq *pgx.QueuedQuery
		if len(m.Wait.Match) == 0 {
			qq = b.Queue(s.q(stmtLookbackAny), m.Wait.Event, m.Wait.LookbackFrom, m.RunID, waitsOfRun[m.RunID])
		} else {
			qq = b.Queue(s.q(stmtLookback), m.Wait.Event, m.Wait.LookbackFrom, m.Wait.Match, m.RunID,
				waitsOfRun[m.RunID])
		}
		qq.Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var e lookbackEvent
				if err := rows.Scan(&e.id, &e.payload); err != nil {
					return err
				}
				found[i] = append(found[i], e)
			}
			return rows.Err()
		})
	}
	if err := t.send(ctx, b); err != nil {
		return nil, err
	}

	// Decide, mutation by mutation.
	out := make([]store.MutationResult, len(ms))
	w := applyWrites{isDirty: map[string]bool{}, resultSet: map[string]bool{}, delivered: map[[2]string]bool{}}
	for i, m := range ms {
		out[i] = w.apply(runs[m.RunID], m, found[i])
	}

	// Round trip 2: write and commit.
	b = t.batch()
	w.queue(s, b, runs)
	if err := t.commit(ctx, b); err != nil {
		return nil, err
	}
	return out, nil
}

// lookbackEvent is a published event a wait may receive at once.
type lookbackEvent struct {
	id      string
	payload []byte
}

// applyWrites accumulates what the accepted mutations of a batch write.
type applyWrites struct {
	events eventRows
	timers timerRows
	waits  []waitRow
	// dirty lists the runs to write, in first-touched order (isDirty indexes it); resultSet
	// those whose result a mutation set.
	dirty     []string
	isDirty   map[string]bool
	resultSet map[string]bool
	// delivered holds (run, event) pairs delivered in this batch, so a second wait of one run
	// does not take the same event again.
	delivered map[[2]string]bool
	ready     []string // queues of runs handed back
	finished  []string // runs that finished in this batch: their timers and waits go
}

type waitRow struct {
	runID string
	store.Wait
}

// apply checks m against r (nil: no such run), and, if it holds, applies it to r in memory and
// records its writes.
func (w *applyWrites) apply(r *store.Run, m store.Mutation, found []lookbackEvent) store.MutationResult {
	if r == nil {
		return store.MutationResult{Err: notFound(m.RunID)}
	}
	if err := store.FenceRefusal(m.RunID, r.State, r.Fence, m.Fence); err != nil {
		return store.MutationResult{Err: err, Run: cloneRun(*r)}
	}
	if err := store.StaleSeq(*r, m); err != nil {
		return store.MutationResult{Err: err, Run: cloneRun(*r)}
	}
	tr := m.Transition
	to := tr.State
	if to == "" {
		to = store.StateRunning
	}
	if !slices.Contains(store.States, to) {
		return store.MutationResult{Err: jobs.Errorf(jobs.CodeInvariant, "run %s: unknown state %q", m.RunID, to)}
	}
	now := pgTime(m.Now)
	if !w.isDirty[r.ID] {
		w.isDirty[r.ID] = true
		w.dirty = append(w.dirty, r.ID)
	}
	appended := make([]history.Event, 0, len(m.Events)+1)
	for _, e := range m.Events {
		appended = append(appended, w.events.add(r, e))
	}
	r.UpdatedAt = now

	if tr.Wait != nil {
		for _, e := range found {
			k := [2]string{r.ID, e.id}
			if w.delivered[k] {
				continue
			}
			// The event came before the wait: it is received now. Nothing of the transition
			// applies (no state change, no timer, no registered wait): the run stays running
			// under this worker's lease and the worker goes on past the wait.
			w.delivered[k] = true
			ev := history.New(now, history.EventReceived{WaitName: tr.Wait.Name, EventID: e.id, Payload: e.payload})
			appended = append(appended, w.events.add(r, ev))
			return store.MutationResult{Appended: appended, Run: cloneRun(*r)}
		}
		w.waits = append(w.waits, waitRow{r.ID, *tr.Wait})
	}

	if tr.Attempt > 0 {
		r.Attempt = tr.Attempt
	}
	if tr.Result != nil {
		r.Result = slices.Clone(tr.Result)
		w.resultSet[r.ID] = true
	}
	if tr.ErrorCode != "" || tr.Error != "" || tr.StopReason != "" {
		r.ErrorCode, r.Error, r.StopReason = tr.ErrorCode, tr.Error, tr.StopReason
	}
	for _, t := range tr.Timers {
		w.timers.add(r.ID, t)
	}
	switch {
	case to == store.StateRunning:
		// A completed step: the worker keeps the run and its lease.
	case to.Finished():
		// A finished run waits for nothing: its timers and waits go, those of this transition
		// included.
		r.WorkerID, r.LeaseUntil, r.FinishedAt = "", time.Time{}, now
		w.timers.drop(r.ID)
		w.waits = slices.DeleteFunc(w.waits, func(x waitRow) bool { return x.runID == r.ID })
		w.finished = append(w.finished, r.ID)
	default:
		if !(tr.Sticky && to == store.StateSuspended) {
			r.WorkerID = ""
		}
		r.LeaseUntil = time.Time{}
		if to == store.StateReady {
			r.ReadyAt = pgTime(tr.ReadyAt)
			if r.ReadyAt.IsZero() {
				r.ReadyAt = now
			}
			w.ready = append(w.ready, r.Queue)
		}
	}
	r.State = to
	return store.MutationResult{Appended: appended, Run: cloneRun(*r)}
}

// queue queues the batch's writes on b: one statement per kind of row, whatever the batch size.
func (w *applyWrites) queue(s *Store, b *pgx.Batch, runs map[string]*store.Run) {
	w.events.queue(s, b)
	if n := len(w.dirty); n > 0 {
		var (
			ids, states, workers                = make([]string, n), make([]string, n), make([]string, n)
			codes, errs, stops                  = make([]string, n), make([]string, n), make([]string, n)
			attempts                            = make([]int32, n)
			seqs                                = make([]int64, n)
			results                             = make([][]byte, n)
			leases, readyAts, updated, finishes = make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]time.Time, n), make([]pgtype.Timestamptz, n)
		)
		for i, id := range w.dirty {
			r := runs[id]
			ids[i], states[i], workers[i] = id, string(r.State), r.WorkerID
			codes[i], errs[i], stops[i] = r.ErrorCode, r.Error, r.StopReason
			attempts[i], seqs[i] = int32(r.Attempt), r.LastSeq
			if w.resultSet[id] {
				results[i] = r.Result
			}
			leases[i], readyAts[i], updated[i], finishes[i] = ts(r.LeaseUntil), ts(r.ReadyAt), r.UpdatedAt, ts(r.FinishedAt)
		}
		b.Queue(s.q(stmtRunsUpdate), textArray(ids), textArray(states), attempts, textArray(workers),
			tsArray(leases), tsArray(readyAts), seqs, byteaArray(results), textArray(codes),
			textArray(errs), textArray(stops), timeArray(updated), tsArray(finishes))
	}
	if len(w.finished) > 0 {
		b.Queue(s.q(stmtTimersClear), w.finished)
		b.Queue(s.q(stmtWaitsClear), w.finished)
	}
	w.timers.queue(s, b)
	for _, x := range w.waits {
		match := strs(x.Match)
		head := ""
		if len(match) > 0 {
			head = match[0]
		}
		b.Queue(s.q(stmtWaitRegister), x.runID, x.Name, x.Event, match, head, x.LookbackFrom)
	}
	if len(w.delivered) > 0 {
		var runIDs, eventIDs []string
		for k := range w.delivered {
			runIDs, eventIDs = append(runIDs, k[0]), append(eventIDs, k[1])
		}
		b.Queue(s.q(stmtDeliveriesAdd), runIDs, eventIDs)
	}
	s.notifyReady(b, w.ready)
}
