package scheduler

import (
	"slices"
	"testing"
	"time"
)

func TestWalk(t *testing.T) {
	t.Parallel()
	c, err := Schedule{Name: "h", Spec: "0 * * * *", TZ: "UTC", Job: "j", NoTenant: true}.compile()
	if err != nil {
		t.Fatal(err)
	}
	w := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := func(n int) time.Time { return w.Add(time.Duration(n) * time.Hour) }
	cases := []struct {
		name    string
		policy  Policy
		cap     int
		now     time.Time
		fire    []time.Time
		to      time.Time
		missed  int64
		nothing bool
	}{
		{name: "nothing due", policy: Skip, cap: 10, now: h(1).Add(-time.Second), nothing: true},
		{name: "one due, on time", policy: Skip, cap: 10, now: h(1), fire: []time.Time{h(1)}, to: h(1)},
		{name: "skip within the cap", policy: Skip, cap: 10, now: h(3).Add(time.Minute), fire: []time.Time{h(3)}, to: h(3), missed: 2},
		{name: "run-once within the cap", policy: RunOnce, cap: 10, now: h(3).Add(time.Minute), fire: []time.Time{h(1)}, to: h(3), missed: 2},
		{name: "run-all within the cap", policy: RunAll, cap: 10, now: h(3).Add(time.Minute), fire: []time.Time{h(1), h(2), h(3)}, to: h(3)},
		{name: "exactly the cap", policy: RunAll, cap: 3, now: h(3).Add(time.Minute), fire: []time.Time{h(1), h(2), h(3)}, to: h(3)},
		// Past the cap: the walk stops at 2; the 3 beyond are dropped (skip fires the latest of
		// them) and the watermark is now.
		{name: "skip past the cap", policy: Skip, cap: 2, now: h(5).Add(time.Minute), fire: []time.Time{h(5)}, to: h(5).Add(time.Minute), missed: 4},
		{name: "run-once past the cap", policy: RunOnce, cap: 2, now: h(5).Add(time.Minute), fire: []time.Time{h(1)}, to: h(5).Add(time.Minute), missed: 4},
		{name: "run-all past the cap", policy: RunAll, cap: 2, now: h(5).Add(time.Minute), fire: []time.Time{h(1), h(2)}, to: h(5).Add(time.Minute), missed: 3},
	}
	for _, tc := range cases {
		p := walk(c.sched, tc.policy, tc.cap, w, tc.now)
		if tc.nothing {
			if !p.to.IsZero() || len(p.fire) != 0 {
				t.Errorf("%s: %+v, want nothing", tc.name, p)
			}
			continue
		}
		if !slices.EqualFunc(p.fire, tc.fire, time.Time.Equal) || !p.to.Equal(tc.to) || p.missed != tc.missed {
			t.Errorf("%s: fire %v to %v missed %d; want %v, %v, %d", tc.name, p.fire, p.to, p.missed, tc.fire, tc.to, tc.missed)
		}
	}
}

// stuck is a schedule whose Next never advances past at: it returns at itself, or an instant
// before its argument.
type stuck struct{ at time.Time }

func (s stuck) Next(t time.Time) time.Time {
	if t.Before(s.at) {
		return s.at
	}
	return s.at.Add(-time.Minute)
}

// A Next that does not advance is no next occurrence: the walk fires what came before it, never
// an instant at or before the watermark, never moves the watermark back, and counts nothing
// past it as missed (it used to count one instant up to countLimit times, in a loop of as many
// Next calls).
func TestWalkStopsOnANonAdvancingNext(t *testing.T) {
	t.Parallel()
	w := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := w.Add(time.Hour)
	for _, policy := range []Policy{Skip, RunOnce, RunAll} {
		p := walk(stuck{at}, policy, 10, w, w.Add(3*time.Hour))
		if !slices.EqualFunc(p.fire, []time.Time{at}, time.Time.Equal) || !p.to.Equal(at) || p.missed != 0 {
			t.Errorf("%s from before: fire %v to %v missed %d; want [%v], %v, 0", policy, p.fire, p.to, p.missed, at, at)
		}
		if p := walk(stuck{at}, policy, 10, at, w.Add(3*time.Hour)); !p.to.IsZero() || len(p.fire) != 0 || p.missed != 0 {
			t.Errorf("%s from the stuck instant: %+v, want nothing", policy, p)
		}
	}
}
