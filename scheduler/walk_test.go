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
