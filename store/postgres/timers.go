package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// TimerFire fires due timers in rounds, one transaction each, until limit runs are woken or a
// round leaves nothing it could have taken: it found nothing, or it locked fewer runs than it
// asked for, so its read of the due timers was not cut short by its limit. A round that was not
// full ends the call without a second round to find the queue empty: under a steady stream of
// wake-ups that empty round was two more round trips in every firing, each a millisecond or so
// added to the lag of the timers that fell due meanwhile. (A run passed over because another
// transaction held it, or a run with several due timers among the ones read, can leave a due
// timer behind; the caller's next call fires it, as TimerNext says it is due.) A round is three
// round trips:
//
//  1. BEGIN; lock the runs of the earliest due timers FOR UPDATE SKIP LOCKED. A run another
//     transaction holds is passed over, not waited for: another timer service is firing it, or
//     a worker's write is in flight and the next round will see what it left.
//  2. Read the due timers of the runs we locked, in a snapshot taken after the locks. Timer rows
//     are written only under their run's lock, so these are exactly what the last holder left,
//     and a timer another service fired is simply gone: two services never fire one timer.
//  3. Per run, in due order: a suspended or delayed run wakes (the timer's Fire event appended,
//     every timer and wait of the run removed, ready now, its worker kept for stickiness); a run
//     in any other state has its due timers dropped. Then COMMIT.
//
// On an error, the runs woken by the rounds that committed before it are returned with it.
func (s *Store) TimerFire(ctx context.Context, now time.Time, limit int) ([]store.Woken, error) {
	var out []store.Woken
	for limit <= 0 || len(out) < limit {
		want := 0
		if limit > 0 {
			want = limit - len(out)
		}
		woken, full, err := s.timerRound(ctx, now, want)
		out = append(out, woken...)
		if err != nil {
			return out, err
		}
		if !full {
			break
		}
	}
	return out, nil
}

type dueTimer struct {
	runID string
	key   string
	dueAt time.Time
	fire  *history.Event
}

// timerRound is one round of TimerFire: it wakes at most limit runs (limit ≤ 0: no limit) and
// reports whether it was full: it fired or dropped something, and locked as many runs as its
// limit, so more may be due.
func (s *Store) timerRound(ctx context.Context, now time.Time, limit int) ([]store.Woken, bool, error) {
	t, err := s.begin(ctx, "timer fire")
	if err != nil {
		return nil, false, err
	}
	defer t.release()

	runs := map[string]*store.Run{}
	var ids []string
	b := t.batch()
	b.Queue(s.q(stmtTimersDueRuns), now, limitArg(limit)).Query(func(rows pgx.Rows) error {
		return collectRuns(rows, runs, &ids)
	})
	if err := t.send(ctx, b); err != nil {
		return nil, false, err
	}
	if len(ids) == 0 {
		return nil, false, nil
	}

	var due []dueTimer
	b = t.batch()
	b.Queue(s.q(stmtTimersDueOf), ids, now).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var d dueTimer
			var kind *string
			var name string
			var at pgtype.Timestamptz
			var data []byte
			if err := rows.Scan(&d.runID, &d.key, &d.dueAt, &kind, &name, &at, &data); err != nil {
				return err
			}
			if kind != nil {
				d.fire = &history.Event{Kind: history.Kind(*kind), Name: name, At: fromTS(at), Data: data}
			}
			due = append(due, d)
		}
		return rows.Err()
	})
	if err := t.send(ctx, b); err != nil {
		return nil, false, err
	}
	if len(due) == 0 {
		return nil, false, nil
	}

	now = pgTime(now)
	var evs eventRows
	var woken []store.Woken
	var wokeIDs, queues, dropped []string
	var seqs []int64
	done := map[string]bool{}
	for _, d := range due {
		if done[d.runID] {
			continue // the run woke on an earlier timer, which removed this one
		}
		if limit > 0 && len(woken) == limit {
			break
		}
		done[d.runID] = true
		r := runs[d.runID]
		if r.State != store.StateSuspended && r.State != store.StateDelayed {
			// The run woke some other way, or finished: the timer has nothing left to wake.
			dropped = append(dropped, r.ID)
			continue
		}
		w := store.Woken{RunID: r.ID, Queue: r.Queue, WorkerID: r.WorkerID, DueAt: d.dueAt}
		if d.fire != nil {
			d.fire.At = now // when it fired, not when it was due
			w.Appended = []history.Event{evs.add(r, *d.fire)}
		}
		wokeIDs = append(wokeIDs, r.ID)
		seqs = append(seqs, r.LastSeq)
		queues = append(queues, r.Queue)
		woken = append(woken, w)
	}

	b = t.batch()
	evs.queue(s, b)
	if len(wokeIDs) > 0 {
		b.Queue(s.q(stmtRunsWake), wokeIDs, seqs, now)
		b.Queue(s.q(stmtTimersClear), wokeIDs)
		b.Queue(s.q(stmtWaitsClear), wokeIDs)
	}
	if len(dropped) > 0 {
		b.Queue(s.q(stmtTimersDropDue), dropped, now)
	}
	s.notifyReady(b, queues)
	if err := t.commit(ctx, b); err != nil {
		return nil, false, err
	}
	return woken, len(wokeIDs)+len(dropped) > 0 && limit > 0 && len(ids) >= limit, nil
}

// TimerNext is the earliest due time of any timer (the timers_due index's first entry).
func (s *Store) TimerNext(ctx context.Context) (time.Time, bool, error) {
	var due pgtype.Timestamptz
	if err := s.pool.QueryRow(ctx, s.q(stmtTimerNext)).Scan(&due); err != nil {
		return time.Time{}, false, unavailable("timer next", err)
	}
	return fromTS(due), due.Valid, nil
}
