package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// RunPublish stores the event and delivers it to the waits it matches, in one transaction under
// the event name's advisory lock (see RunApply for why that lock makes a racing wait
// registration receive the event exactly once). Up to three round trips:
//
//  1. BEGIN; the lock; INSERT the event (ON CONFLICT on its id DO NOTHING: a second publish of
//     an id is a no-op, as an outbox relay resending after an unknown commit needs); the
//     candidate waits, found by name and match_head through the waits_event index, then checked
//     with history.Matches in Go.
//  2. Lock the candidates' runs in id order, then re-read their waits in a snapshot taken after
//     the locks: no wait of this name can appear meanwhile (we hold the name's lock), but one can
//     go (its run woke by a timer, or was cancelled), and only a wait still there is delivered.
//  3. Per run (suspended, holding a matching wait; the first by name if several match):
//     EventReceived appended, timers and waits removed, the delivery recorded, ready now with
//     its worker kept. Then COMMIT. With no candidate, COMMIT alone.
//
// A run's publish (p.Under) adds its run to step 2's locks, taken FOR UPDATE in id order with
// the candidates' (as every transaction here locks runs: after its advisory locks, in id order),
// so a kept id or no candidate costs that round trip too. Under READ COMMITTED the lock waits
// for a cancel or a claim in flight and reads the row it committed; one that comes later waits
// for this commit. The run is checked there (store.FenceRefusal), and a refusal rolls back the
// event inserted in step 1: nothing is published. A publish without the condition sends the
// same statements as before.
func (s *Store) RunPublish(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	fields := strs(p.Fields)
	t, err := s.begin(ctx, "run publish")
	if err != nil {
		return store.PublishResult{}, err
	}
	defer t.release()

	fresh := false
	var cands []waitMatch
	b := t.batch()
	b.Queue(s.q(stmtLock), s.eventLock(p.Name))
	b.Queue(s.q(stmtEventInsert), p.ID, p.Name, p.Payload, fields, p.Now).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			fresh = true
		}
		return rows.Err()
	})
	b.Queue(s.q(stmtWaitsCandidates), p.Name, fields).Query(func(rows pgx.Rows) error {
		var err error
		cands, err = scanWaits(rows, fields)
		return err
	})
	if err := t.send(ctx, b); err != nil {
		return store.PublishResult{}, err
	}
	var ids []string
	if fresh {
		for _, w := range cands {
			ids = append(ids, w.runID)
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
	}
	locks := ids
	if p.Under != nil {
		locks = append(slices.Clone(ids), p.Under.RunID)
		slices.Sort(locks)
		locks = slices.Compact(locks)
	}
	if len(locks) == 0 {
		return store.PublishResult{}, t.commit(ctx, t.batch())
	}

	runs := map[string]*store.Run{}
	var waits []waitMatch
	b = t.batch()
	b.Queue(s.q(stmtRunsLock), locks).Query(func(rows pgx.Rows) error { return collectRuns(rows, runs, nil) })
	if len(ids) > 0 {
		b.Queue(s.q(stmtWaitsOf), ids, p.Name).Query(func(rows pgx.Rows) error {
			var err error
			waits, err = scanWaits(rows, fields)
			return err
		})
	}
	if err := t.send(ctx, b); err != nil {
		return store.PublishResult{}, err
	}
	if p.Under != nil {
		r := runs[p.Under.RunID]
		if r == nil {
			return store.PublishResult{}, notFound(p.Under.RunID)
		}
		if err := store.FenceRefusal(r.ID, r.State, r.Fence, p.Under.Fence); err != nil {
			return store.PublishResult{}, err // the deferred release rolls the event back
		}
	}

	now := pgTime(p.Now)
	var evs eventRows
	var res store.PublishResult
	var woke, queues []string
	var seqs []int64
	for _, w := range waits { // ordered by run id, then wait name
		r := runs[w.runID]
		// Only a suspended run is parked on its waits; a wait left on a run in another state (a
		// transition that registered it and kept the run running) must not wake a run a worker
		// holds. One delivery per run.
		if r == nil || r.State != store.StateSuspended || slices.Contains(woke, r.ID) {
			continue
		}
		ev := evs.add(r, history.New(now, history.EventReceived{WaitName: w.name, EventID: p.ID, Payload: p.Payload}))
		woke = append(woke, r.ID)
		seqs = append(seqs, r.LastSeq)
		queues = append(queues, r.Queue)
		res.Delivered = append(res.Delivered, store.Woken{RunID: r.ID, Queue: r.Queue, WorkerID: r.WorkerID,
			Appended: []history.Event{ev}})
	}

	b = t.batch()
	if len(woke) > 0 {
		evs.queue(s, b)
		b.Queue(s.q(stmtRunsWake), woke, seqs, now)
		b.Queue(s.q(stmtTimersClear), woke)
		b.Queue(s.q(stmtWaitsClear), woke)
		events := make([]string, len(woke))
		for i := range events {
			events[i] = p.ID
		}
		b.Queue(s.q(stmtDeliveriesAdd), woke, events)
		s.notifyReady(b, queues)
	}
	if err := t.commit(ctx, b); err != nil {
		return store.PublishResult{}, err
	}
	return res, nil
}

// waitMatch is a registered wait that an event's fields satisfy.
type waitMatch struct {
	runID string
	name  string
}

// scanWaits reads (run_id, name, match) rows and keeps the waits whose match fields includes.
func scanWaits(rows pgx.Rows, fields []string) ([]waitMatch, error) {
	var out []waitMatch
	for rows.Next() {
		var w waitMatch
		var match []string
		if err := rows.Scan(&w.runID, &w.name, &match); err != nil {
			return nil, err
		}
		if history.Matches(match, fields) {
			out = append(out, w)
		}
	}
	return out, rows.Err()
}

// EventPrune deletes the events published before before, with their delivery records (a pruned
// event can no longer be found by a lookback, so whom it reached no longer matters). One
// statement.
func (s *Store) EventPrune(ctx context.Context, before time.Time) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, s.q(stmtEventPrune), before).Scan(&n); err != nil {
		return 0, unavailable("event prune", err)
	}
	return n, nil
}
