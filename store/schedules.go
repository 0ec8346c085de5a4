package store

import (
	"context"
	"time"

	"github.com/ultimat3/jobs"
)

// Leader is the holder of a role's lease row. A role (the scheduler's is "scheduler") has at
// most one holder whose lease is unexpired; it is a row with an expiry, never a session lock,
// so it needs no connection affinity and survives a pooled connection going back to the pool.
type Leader struct {
	Role   string
	Holder string
	Until  time.Time
}

// LeaderParams acquires or renews a role's lease for Holder until Until.
type LeaderParams struct {
	Role   string
	Holder string
	Now    time.Time
	Until  time.Time
}

// ScheduleState is the durable state of one schedule, kept by the store.
type ScheduleState struct {
	Name string
	// Watermark is the instant every occurrence at or before which has been dealt with (fired,
	// or dropped by the catch-up policy). The next round walks the occurrences after it.
	Watermark time.Time
	// LastFire is the occurrence most recently fired by the schedule (zero when none);
	// LastRunID its run.
	LastFire  time.Time
	LastRunID string
	// Missed counts the occurrences the catch-up policy dropped, since the schedule was first
	// seen.
	Missed int64
	Paused bool
	// UpdatedAt is the Now of the last change.
	UpdatedAt time.Time
}

// ScheduleFireParams fires a schedule's occurrences: Runs are created exactly as RunCreate
// creates them, and the schedule's watermark moves from From to To, in one transaction, and only
// if Holder still holds Role's lease at Now, the watermark is still From and the schedule is not
// paused.
type ScheduleFireParams struct {
	Name   string
	Role   string
	Holder string
	Now    time.Time
	From   time.Time
	To     time.Time
	// LastFire, when set, becomes the state's, with the last of Runs as LastRunID.
	LastFire time.Time
	// Missed is added to the state's count.
	Missed int64
	Runs   []CreateRunParams
	// Rewind lets To be before From, and only with no Runs: a leader pulls back a watermark a
	// round on a clock that ran ahead left in the future, which would otherwise silence the
	// schedule until real time caught up with it. Without it, a watermark never moves back.
	Rewind bool
}

// Schedules is the store side of the cron scheduler: the leader's lease and each schedule's
// durable watermark.
type Schedules interface {
	// LeaderAcquire takes Role's lease for Holder when nobody holds it, when its holder's lease
	// ended at or before Now, or when Holder already holds it (a renewal); it then lasts until
	// Until. It returns the holder after the call: Holder == p.Holder means the caller leads.
	// Two concurrent acquirers of a free role never both lead.
	LeaderAcquire(ctx context.Context, p LeaderParams) (Leader, error)

	// LeaderRelease gives Role's lease up if Holder holds it; otherwise it does nothing.
	LeaderRelease(ctx context.Context, role, holder string) error

	// ScheduleInit creates the state of each schedule that has none, with the watermark given
	// (a schedule first seen fires nothing retroactively), and returns the state of every name
	// asked, in order. An existing state is left unchanged.
	ScheduleInit(ctx context.Context, names []string, watermark time.Time) ([]ScheduleState, error)

	// ScheduleList returns every schedule's state, by name.
	ScheduleList(ctx context.Context) ([]ScheduleState, error)

	// ScheduleFire creates p.Runs and advances the watermark atomically (see ScheduleFireParams).
	// Refusals change nothing: X_SCHEDULE_NOT_LEADER when Holder does not hold Role's lease at
	// Now, X_SCHEDULE_CONFLICT when the watermark is not From or the schedule is paused,
	// X_SCHEDULE_NOT_FOUND when it has no state. The results are RunCreate's.
	ScheduleFire(ctx context.Context, p ScheduleFireParams) ([]CreateRunResult, error)

	// SchedulePause pauses or resumes a schedule. Resuming also moves the watermark to
	// watermark, so the occurrences of the pause are skipped, not caught up. X_SCHEDULE_NOT_FOUND
	// when it has no state.
	SchedulePause(ctx context.Context, name string, paused bool, watermark, now time.Time) (ScheduleState, error)
}

// CheckFire is the rule every backend applies, inside ScheduleFire's transaction, to the lease
// row and the schedule's state it read (locked): a refusal is returned before anything is
// written. leaderOK and stateOK say whether the rows exist.
func CheckFire(p ScheduleFireParams, leader Leader, leaderOK bool, st ScheduleState, stateOK bool) error {
	switch {
	case !leaderOK || leader.Holder != p.Holder || !leader.Until.After(p.Now):
		return jobs.Errorf(jobs.CodeScheduleNotLeader, "schedule %q: %q does not hold the %q lease at %s",
			p.Name, p.Holder, p.Role, p.Now.UTC().Format(time.RFC3339Nano))
	case !stateOK:
		return jobs.Errorf(jobs.CodeScheduleNotFound, "schedule %q has no state", p.Name)
	case st.Paused:
		return jobs.Errorf(jobs.CodeScheduleConflict, "schedule %q is paused", p.Name)
	case !st.Watermark.Equal(p.From):
		return jobs.Errorf(jobs.CodeScheduleConflict, "schedule %q: the watermark is %s, not %s (another leader fired it)",
			p.Name, st.Watermark.UTC().Format(time.RFC3339Nano), p.From.UTC().Format(time.RFC3339Nano))
	case p.To.Before(p.From) && !p.Rewind:
		return jobs.Errorf(jobs.CodeInvariant, "schedule %q: the watermark would move back from %s to %s",
			p.Name, p.From.UTC().Format(time.RFC3339), p.To.UTC().Format(time.RFC3339))
	case p.Rewind && len(p.Runs) > 0:
		return jobs.Errorf(jobs.CodeInvariant, "schedule %q: a rewind of the watermark fires no runs", p.Name)
	}
	return nil
}

// Fired is st after p committed.
func Fired(st ScheduleState, p ScheduleFireParams, runs []CreateRunResult) ScheduleState {
	st.Watermark = p.To
	if !p.LastFire.IsZero() {
		st.LastFire = p.LastFire
		if len(runs) > 0 {
			st.LastRunID = runs[len(runs)-1].Run.ID
		}
	}
	st.Missed += p.Missed
	st.UpdatedAt = p.Now
	return st
}

// ErrScheduleNotFound is the refusal of a schedule with no state.
func ErrScheduleNotFound(name string) error {
	return jobs.Errorf(jobs.CodeScheduleNotFound, "schedule %q has no state", name)
}

// Paused is st after SchedulePause: resuming a paused schedule moves its watermark to watermark
// (never back), so the occurrences of the pause are skipped; anything else changes only Paused.
func Paused(st ScheduleState, paused bool, watermark, now time.Time) ScheduleState {
	if st.Paused && !paused && watermark.After(st.Watermark) {
		st.Watermark = watermark
	}
	if st.Paused != paused {
		st.UpdatedAt = now
	}
	st.Paused = paused
	return st
}
