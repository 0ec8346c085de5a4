package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"sort"
	"time"

	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// pairs encodes canonical pairs as the JSON array the match and fields columns hold (a JSON
// array rather than a joined string: a field name may hold any character, a separator too).
func pairs(keys []string) (string, error) {
	if keys == nil {
		keys = []string{}
	}
	b, err := json.Marshal(keys)
	return string(b), err
}

func unpairs(s string) ([]string, error) {
	var keys []string
	err := json.Unmarshal([]byte(s), &keys)
	return keys, err
}

// sorted returns keys sorted (copied when not already): history.Matches needs both sides
// sorted, and a caller's slice is never reordered in place.
func sorted(keys []string) []string {
	if sort.StringsAreSorted(keys) {
		return keys
	}
	out := append([]string(nil), keys...)
	sort.Strings(out)
	return out
}

// registerWait stores a run's wait (replacing one of the same name).
func (t *wtx) registerWait(runID string, w *store.Wait) error {
	match := sorted(w.Match)
	enc, err := pairs(match)
	if err != nil {
		return err
	}
	head := ""
	if len(match) > 0 {
		head = match[0]
	}
	_, err = t.exec(sqlWaitUpsert, runID, w.Name, w.Event, enc, head, encTime(w.LookbackFrom))
	return err
}

// published is an event found in the lookback window.
type published struct {
	id      string
	payload []byte
}

// lookback finds the earliest published event that satisfies w for the run at once: named
// w.Event, published at or after w.LookbackFrom, whose fields include w.Match, and not yet
// delivered to the run.
func (t *wtx) lookback(runID string, w *store.Wait) (published, bool, error) {
	match := sorted(w.Match)
	head := ""
	if len(match) > 0 {
		head = match[0]
	}
	rows, err := t.query(sqlLookback, nameArgs(
		"event", w.Event, "from", encTime(w.LookbackFrom), "head", head, "run", runID)...)
	if err != nil {
		return published{}, false, err
	}
	defer rows.Close()
	// Candidates come earliest first; the first that matches wholly is the one. The rows are
	// read one by one (not collected) because the first match usually comes first.
	for rows.Next() {
		var ev published
		var fields string
		if err := rows.Scan(&ev.id, blob{&ev.payload}, &fields); err != nil {
			return published{}, false, err
		}
		have, err := unpairs(fields)
		if err != nil {
			return published{}, false, err
		}
		if history.Matches(match, have) {
			return ev, true, rows.Close()
		}
	}
	return published{}, false, rows.Err()
}

// RunPublish implements store.Store. A publish is identified by its id: publishing an id again
// (an outbox relay resending after an unknown commit) does nothing. The first publish reached
// every wait registered then, and a wait registered since finds the event by lookback. A run's
// publish (p.Under) first reads the run's state and fence in the same transaction: the single
// writer orders a cancel or a claim either before that read or after the commit.
func (s *Store) RunPublish(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	fields := sorted(p.Fields)
	enc, err := pairs(fields)
	if err != nil {
		return store.PublishResult{}, failed("publish", err)
	}
	now := normTime(p.Now)
	var res store.PublishResult
	err = s.write(ctx, "publish", func(t *wtx) error {
		if p.Under != nil {
			var state string
			var fence int64
			err := t.queryRow(sqlRunStateFence, p.Under.RunID).Scan(&state, &fence)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				return errNotFound(p.Under.RunID)
			case err != nil:
				return err
			}
			if err := refusal(p.Under.RunID, store.State(state), fence, p.Under.Fence); err != nil {
				return err
			}
		}
		stored, err := t.exec(sqlEventInsert, p.ID, p.Name, blobArg(p.Payload), enc, encTime(now))
		if err != nil {
			return err
		}
		if n, err := stored.RowsAffected(); err != nil || n == 0 {
			return err // n == 0: published before
		}
		type candidate struct{ runID, name, match string }
		rows, err := t.query(sqlWaitsForEvent, nameArgs("event", p.Name, "fields", enc)...)
		if err != nil {
			return err
		}
		cands, err := collect(rows, func(rows *sql.Rows) (candidate, error) {
			var c candidate
			return c, rows.Scan(&c.runID, &c.name, &c.match)
		})
		if err != nil {
			return err
		}
		woken := map[string]bool{}
		for _, c := range cands {
			if woken[c.runID] {
				continue // a run's second wait: the first delivery already ended its suspension
			}
			want, err := unpairs(c.match)
			if err != nil {
				return err
			}
			if !history.Matches(sorted(want), fields) {
				continue
			}
			done, err := t.exec(sqlDeliveryInsert, p.ID, c.runID)
			if err != nil {
				return err
			}
			if n, err := done.RowsAffected(); err != nil {
				return err
			} else if n == 0 {
				continue // this event already reached this run
			}
			r, ok, err := t.getRun(c.runID)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			ev := history.New(now, history.EventReceived{WaitName: c.name, EventID: p.ID, Payload: p.Payload})
			appended, err := t.wake(&r, now, &ev, true, true)
			if err != nil {
				return err
			}
			woken[c.runID] = true
			res.Delivered = append(res.Delivered, store.Woken{RunID: r.ID, Queue: r.Queue, WorkerID: r.WorkerID, Appended: appended})
		}
		return nil
	})
	if err != nil {
		return store.PublishResult{}, err
	}
	return res, nil
}

// EventPrune implements store.Store.
func (s *Store) EventPrune(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.write(ctx, "prune events", func(t *wtx) error {
		// Deliveries go with their events: the lookback only ever looks at stored events.
		if _, err := t.exec(sqlEventPruneDeliveries, encTime(before)); err != nil {
			return err
		}
		res, err := t.exec(sqlEventPrune, encTime(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, err
	}
	return int(n), nil
}
