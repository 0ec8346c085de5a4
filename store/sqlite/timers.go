package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// TimerFire implements store.Store: it wakes up to limit runs (limit ≤ 0: every run with a due
// timer); timers dropped because their run is not waiting do not count. The timers are read and
// fired in one write transaction, so two callers (two engines on one file included) are
// serialised and the second finds the first's timers gone: none fires twice.
func (s *Store) TimerFire(ctx context.Context, now time.Time, limit int) ([]store.Woken, error) {
	now = normTime(now)
	var out []store.Woken
	err := s.write(ctx, "fire timers", func(t *wtx) error {
		for limit <= 0 || len(out) < limit {
			// Every timer of a batch is deleted (fired, removed by its run's wake-up, or
			// dropped), so the next batch reads the ones after it.
			batch := timerBatch
			if limit > 0 {
				batch = limit - len(out)
			}
			dues, err := t.dueTimers(now, batch)
			if err != nil {
				return err
			}
			if len(dues) == 0 {
				return nil
			}
			woken := map[string]bool{}
			for _, d := range dues {
				if woken[d.runID] {
					continue // the run's wake-up already removed this timer
				}
				if d.state != store.StateSuspended && d.state != store.StateDelayed {
					// Dropped: the run woke some other way, or finished (or is gone).
					if _, err := t.exec(sqlTimerDelete, d.runID, d.key); err != nil {
						return err
					}
					continue
				}
				// The run as the batch read it: wake reads no row of its own.
				r := store.Run{ID: d.runID, Queue: d.queue, WorkerID: d.workerID, LastSeq: d.lastSeq}
				if d.fire != nil {
					d.fire.At = now // when it fired, not when it was due
				}
				appended, err := t.wake(&r, now, d.fire, true, d.hasWaits)
				if err != nil {
					return err
				}
				woken[d.runID] = true
				out = append(out, store.Woken{RunID: r.ID, Queue: r.Queue, WorkerID: r.WorkerID, Appended: appended, DueAt: d.dueAt})
			}
			if len(dues) < batch {
				// The batch read every timer due (the writer is alone, so none was passed
				// over): a next read would find nothing, and it is a statement on the one
				// writer in every fire.
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// timerBatch is how many due timers an unlimited TimerFire reads at a time: the rows are read
// before they are changed, and a batch bounds that buffer.
const timerBatch = 256

type dueTimer struct {
	runID, key string
	dueAt      time.Time
	fire       *history.Event
	// The run as the batch read it, in the fire's transaction; a run with two due timers in
	// one batch is woken by the first, and TimerFire skips the second.
	state           store.State
	queue, workerID string
	lastSeq         int64
	hasWaits        bool // the run has a wait for an event besides the timer
}

func (t *wtx) dueTimers(now time.Time, limit int) ([]dueTimer, error) {
	rows, err := t.query(sqlTimersDue, encTime(now), limit)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(rows *sql.Rows) (dueTimer, error) {
		var d dueTimer
		var kind, name, state, queue, worker sql.NullString
		var due int64
		var at, lastSeq sql.NullInt64
		var data []byte
		if err := rows.Scan(&d.runID, &d.key, &due, &kind, &name, &at, blob{&data}, &state, &queue, &worker, &lastSeq, &d.hasWaits); err != nil {
			return d, err
		}
		d.dueAt = decTime(due)
		d.state, d.queue, d.workerID, d.lastSeq = store.State(state.String), queue.String, worker.String, lastSeq.Int64
		if kind.Valid {
			d.fire = &history.Event{Kind: history.Kind(kind.String), Name: name.String, At: decTime(at.Int64), Data: data}
		}
		return d, nil
	})
}

// TimerNext implements store.Store.
func (s *Store) TimerNext(ctx context.Context) (time.Time, bool, error) {
	rows, err := s.readQuery(ctx, sqlTimerNext)
	if err != nil {
		return time.Time{}, false, failed("next timer", err)
	}
	dues, err := collect(rows, func(rows *sql.Rows) (sql.NullInt64, error) {
		var due sql.NullInt64
		return due, rows.Scan(&due)
	})
	if err != nil {
		return time.Time{}, false, failed("next timer", err)
	}
	if len(dues) == 0 || !dues[0].Valid {
		return time.Time{}, false, nil
	}
	return decTime(dues[0].Int64), true, nil
}
