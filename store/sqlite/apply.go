package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"

	jobs "github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// RunApply implements store.Store: every mutation of the call shares one transaction, so a batch
// of steps from many runs costs one commit (one fsync). Each mutation is checked before it
// writes anything, so a refused one leaves nothing to undo and the others commit.
func (s *Store) RunApply(ctx context.Context, ms []store.Mutation) ([]store.MutationResult, error) {
	out := make([]store.MutationResult, len(ms))
	err := s.write(ctx, "apply", func(t *wtx) error {
		for i := range ms {
			res, err := t.apply(&ms[i])
			if err != nil {
				return err
			}
			out[i] = res
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// apply applies one mutation. Its error is the store's failure; a refusal is in the result.
func (t *wtx) apply(m *store.Mutation) (store.MutationResult, error) {
	var hasTimers, hasWaits bool
	r, err := scanRun(t.queryRow(sqlRunGetApply, m.RunID), &hasTimers, &hasWaits)
	if errors.Is(err, sql.ErrNoRows) {
		return store.MutationResult{Err: errNotFound(m.RunID)}, nil
	}
	if err != nil {
		return store.MutationResult{}, err
	}
	was := r
	if err := refusal(r.ID, r.State, r.Fence, m.Fence); err != nil {
		return store.MutationResult{Err: err, Run: r}, nil
	}
	if err := store.StaleSeq(r, *m); err != nil {
		return store.MutationResult{Err: err, Run: r}, nil
	}
	if to := m.State; to != "" && !slices.Contains(store.States, to) {
		return store.MutationResult{Err: jobs.Errorf(jobs.CodeInvariant, "run %s: unknown state %q", r.ID, to), Run: r}, nil
	}
	appended, err := t.appendEvents(&r, m.Events...)
	if err != nil {
		return store.MutationResult{}, err
	}
	now := normTime(m.Now)

	if w := m.Wait; w != nil {
		// The lookback check runs in the write transaction, as does every publish, so a publish
		// lands either before it (and is found here) or after the wait is registered (and
		// finds the wait): never between, never lost.
		ev, found, err := t.lookback(r.ID, w)
		if err != nil {
			return store.MutationResult{}, err
		}
		if found {
			received := history.New(now, history.EventReceived{WaitName: w.Name, EventID: ev.id, Payload: ev.payload})
			more, err := t.appendEvents(&r, received)
			if err != nil {
				return store.MutationResult{}, err
			}
			appended = append(appended, more...)
			if _, err := t.exec(sqlDeliveryInsert, ev.id, r.ID); err != nil {
				return store.MutationResult{}, err
			}
			// The wait is satisfied before it began: nothing of the transition applies (no
			// timer, no suspension), and the worker carries on with the event.
			r.UpdatedAt = now
			if err := t.saveChanges(was, r); err != nil {
				return store.MutationResult{}, err
			}
			return store.MutationResult{Appended: appended, Run: r}, nil
		}
	}

	transition(&r, &m.Transition, now)
	if r.State.Finished() {
		// A finished run waits for nothing: its timers and waits go, the mutation's own
		// included (a timer would be dropped at fire time anyway; removing it keeps TimerNext
		// honest). The run's timers and waits were read with it, in this transaction.
		if err := t.clearSome(r.ID, hasTimers, hasWaits); err != nil {
			return store.MutationResult{}, err
		}
	} else {
		for _, tm := range m.Timers {
			if err := t.armTimer(r.ID, tm); err != nil {
				return store.MutationResult{}, err
			}
		}
		if w := m.Wait; w != nil {
			if err := t.registerWait(r.ID, w); err != nil {
				return store.MutationResult{}, err
			}
		}
	}
	if err := t.saveChanges(was, r); err != nil {
		return store.MutationResult{}, err
	}
	return store.MutationResult{Appended: appended, Run: r}, nil
}

// transition makes tr of the running run r, at now.
func transition(r *store.Run, tr *store.Transition, now time.Time) {
	state := tr.State
	if state == "" {
		state = store.StateRunning
	}
	if tr.Attempt > 0 {
		r.Attempt = tr.Attempt
	}
	if tr.Result != nil {
		r.Result = cloneBytes(tr.Result)
	}
	if tr.ErrorCode != "" || tr.Error != "" || tr.StopReason != "" {
		r.ErrorCode, r.Error, r.StopReason = tr.ErrorCode, tr.Error, tr.StopReason
	}
	if state != store.StateRunning {
		// Sticky keeps the worker that parks a suspended run as its first claimant on wake-up;
		// any other state leaves the run to no worker in particular.
		if !tr.Sticky || state != store.StateSuspended {
			r.WorkerID = ""
		}
		r.LeaseUntil = time.Time{}
	}
	if state == store.StateReady {
		r.ReadyAt = now
		if !tr.ReadyAt.IsZero() {
			r.ReadyAt = normTime(tr.ReadyAt)
		}
	}
	if state.Finished() {
		r.FinishedAt = now
	}
	r.State = state
	r.UpdatedAt = now
}
