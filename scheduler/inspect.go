package scheduler

import (
	"context"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// Info is the operators' view of one schedule: its declaration, its durable state and its next
// occurrences.
type Info struct {
	Schedule
	Checksum string `json:"checksum"`
	// Error is set when the declaration is refused; nothing else is then filled in.
	Error string `json:"error,omitempty"`
	// Paused is true while the schedule is paused.
	Paused bool `json:"paused"`
	// Watermark is the instant up to which every occurrence was dealt with; nil until a leader
	// first saw the schedule.
	Watermark *time.Time `json:"watermark,omitempty"`
	// LastFire is the latest occurrence fired, in the schedule's zone, and LastRunID its run.
	LastFire  *time.Time `json:"lastFire,omitempty"`
	LastRunID string     `json:"lastRunId,omitempty"`
	// Missed counts the occurrences the catch-up policy dropped.
	Missed int64 `json:"missed"`
	// Next are the next five fires after now, in the schedule's zone ("@every d": on its grid
	// from the watermark).
	Next []time.Time `json:"next"`
}

// Inspect returns every declared schedule, by name.
func (s *Scheduler) Inspect(ctx context.Context) ([]Info, error) {
	ds, _, err := s.declarations(ctx)
	if err != nil {
		return nil, err
	}
	states, err := s.store.ScheduleList(ctx)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]store.ScheduleState, len(states))
	for _, st := range states {
		byName[st.Name] = st
	}
	now := s.clock.Now()
	out := make([]Info, len(ds))
	for i, d := range ds {
		out[i] = info(d, byName, now)
	}
	return out, nil
}

func info(d declaration, states map[string]store.ScheduleState, now time.Time) Info {
	in := Info{Schedule: d.s, Checksum: d.s.Checksum(), Next: []time.Time{}}
	if d.err != nil {
		in.Error = d.err.Error()
		return in
	}
	in.Schedule = d.c.Schedule
	st, seen := states[d.s.Name]
	in.Next = nextFires(d.c, st.Watermark, watermarkOf(now), 5)
	if seen {
		w := st.Watermark.In(d.c.loc)
		in.Watermark, in.Paused, in.Missed, in.LastRunID = &w, st.Paused, st.Missed, st.LastRunID
		if !st.LastFire.IsZero() {
			lf := st.LastFire.In(d.c.loc)
			in.LastFire = &lf
		}
	}
	return in
}

// Get returns one schedule, or X_SCHEDULE_NOT_FOUND.
func (s *Scheduler) Get(ctx context.Context, name string) (Info, error) {
	all, err := s.Inspect(ctx)
	if err != nil {
		return Info{}, err
	}
	for _, in := range all {
		if in.Name == name {
			return in, nil
		}
	}
	return Info{}, notFound(name)
}

func notFound(name string) error {
	return jobs.Errorf(jobs.CodeScheduleNotFound, "no schedule %q is declared", name)
}

// valid returns a declared, valid schedule.
func (s *Scheduler) valid(ctx context.Context, name string) (*compiled, error) {
	ds, byName, err := s.declarations(ctx)
	if err != nil {
		return nil, err
	}
	if c := byName[name]; c != nil {
		return c, nil
	}
	for _, d := range ds {
		if d.s.Name == name {
			return nil, d.err
		}
	}
	return nil, notFound(name)
}

// Pause stops firing a schedule until Resume; the leader drops nothing while it is paused and
// fires nothing either. Pausing a paused schedule changes nothing.
func (s *Scheduler) Pause(ctx context.Context, name string) (Info, error) {
	return s.setPaused(ctx, name, true)
}

// Resume fires the schedule again from its next occurrence: the occurrences of the pause are
// skipped (the watermark moves to now), not caught up — a pause is deliberate, an outage is not.
func (s *Scheduler) Resume(ctx context.Context, name string) (Info, error) {
	return s.setPaused(ctx, name, false)
}

func (s *Scheduler) setPaused(ctx context.Context, name string, paused bool) (Info, error) {
	if _, err := s.valid(ctx, name); err != nil {
		return Info{}, err
	}
	now := s.clock.Now()
	// A schedule no leader has seen yet has no state: it gets one, as a leader would give it.
	if _, err := s.store.ScheduleInit(ctx, []string{name}, watermarkOf(now)); err != nil {
		return Info{}, err
	}
	if _, err := s.store.SchedulePause(ctx, name, paused, watermarkOf(now), now); err != nil {
		return Info{}, err
	}
	verb := "resumed"
	if paused {
		verb = "paused"
	}
	s.log.Info("jobs.scheduler."+verb, "schedule", name)
	return s.Get(ctx, name)
}

// Trigger fires the schedule now, outside its spec: a run whose idempotency key marks it manual
// (ManualKey) and whose EnqueuedBy is "schedule:<name>:manual". The watermark does not move, so
// the next occurrence fires as it would have. Any node may trigger, leader or not, paused or not.
func (s *Scheduler) Trigger(ctx context.Context, name string) (jobs.EnqueueResult, error) {
	c, err := s.valid(ctx, name)
	if err != nil {
		return jobs.EnqueueResult{}, err
	}
	return s.eng.Enqueue(ctx, c.request(ManualKey(name, s.clock.Now()), "schedule:"+name+":manual"))
}
