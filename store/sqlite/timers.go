package sqlite

import (
	"context"
	"database/sql"
	"errors"
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
				w, ok, err := t.fireTimer(d, now)
				if err != nil {
					return err
				}
				if !ok {
					continue // dropped: the run woke some other way, or finished
				}
				woken[d.runID] = true
				out = append(out, w)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// fireTimer fires one due timer: it wakes the timer's run if the run is suspended or delayed,
// and drops the timer otherwise. It is wake's transition written for the timer path, which runs
// once for every wake-up at the rate timers fall due: one UPDATE moves the run to ready and
// returns what the wake-up needs, where reading the whole row (its input included) and writing
// every mutable column back cost the single writer two statements more per timer; the run's
// timers (this one among them) and waits go in the two deletes every wake-up makes.
func (t *wtx) fireTimer(d dueTimer, now time.Time) (store.Woken, bool, error) {
	var w store.Woken
	var seq int64
	step := 0
	if d.fire != nil {
		step = 1
	}
	err := t.queryRow(sqlTimerWake, nameArgs("now", encTime(now), "zero", int64(minTime), "step", step, "id", d.runID)...).
		Scan(&w.Queue, &w.WorkerID, &seq)
	if errors.Is(err, sql.ErrNoRows) {
		_, err = t.exec(sqlTimerDelete, d.runID, d.key)
		return w, false, err
	}
	if err != nil {
		return w, false, err
	}
	w.RunID = d.runID
	if d.fire != nil {
		e := *d.fire
		// When it fired, not when it was due.
		if _, err := t.exec(sqlHistoryInsert, d.runID, seq, string(e.Kind), e.Name, encTime(now), blobArg(e.Data)); err != nil {
			return w, false, err
		}
	}
	return w, true, t.clearWaiting(d.runID)
}

// timerBatch is how many due timers an unlimited TimerFire reads at a time: the rows are read
// before they are changed, and a batch bounds that buffer.
const timerBatch = 256

type dueTimer struct {
	runID, key string
	fire       *history.Event
}

func (t *wtx) dueTimers(now time.Time, limit int) ([]dueTimer, error) {
	rows, err := t.query(sqlTimersDue, encTime(now), limit)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(rows *sql.Rows) (dueTimer, error) {
		var d dueTimer
		var kind, name sql.NullString
		var at sql.NullInt64
		var data []byte
		if err := rows.Scan(&d.runID, &d.key, &kind, &name, &at, blob{&data}); err != nil {
			return d, err
		}
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
