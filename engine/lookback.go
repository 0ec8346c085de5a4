package engine

import (
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/store"
)

// lookbackFrom is the earliest publish time a new wait may take at once, for the wait's lookback
// mode. The store takes events at or after it, so "none" starts just past now: whatever was
// published up to the registration is out, and a later publish reaches the wait directly. Just
// past is a microsecond, the resolution Postgres keeps: a nanosecond past now was cut back to now
// there, and an event published in the same microsecond before the wait was taken.
func (e *Engine) lookbackFrom(mode string, now time.Time) time.Time {
	if jobs.Lookback(mode) == jobs.LookbackNone {
		return now.Add(time.Microsecond)
	}
	return now.Add(-e.cfg.Lookback)
}

// sinceRunStart raises a since-run-start wait's lookback to the run's creation (its RunStarted,
// which the ledger holds), so events published for an earlier run on the same key are not taken.
// A wait ends its record, so the record's wait is its last command.
func sinceRunStart(m store.Mutation, cmds []frontend.Command, started time.Time) {
	if m.Wait == nil || len(cmds) == 0 || started.IsZero() {
		return
	}
	if last := cmds[len(cmds)-1]; last.Kind == frontend.CmdWait && jobs.Lookback(last.Lookback) == jobs.LookbackSinceRunStart &&
		m.Wait.LookbackFrom.Before(started) {
		m.Wait.LookbackFrom = started
	}
}
