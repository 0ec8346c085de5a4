package scheduler

import (
	"time"

	"github.com/robfig/cron/v3"
)

// countLimit bounds the count of the occurrences past a walk's cap: they are only counted (as
// missed), never fired, but a minutely schedule down for a year would still count half a
// million. Past it, the missed count is a floor.
const countLimit = 100_000

// plan is what one round does with one schedule.
type plan struct {
	// fire are the occurrences to enqueue, in order.
	fire []time.Time
	// to is the new watermark; zero when nothing is due (the watermark stays).
	to time.Time
	// missed counts the due occurrences dropped.
	missed int64
}

// walk decides a round: it walks the occurrences after the watermark that are due at now, at
// most maxCatchUp of them, and the policy picks from what the walk found:
//   - skip fires the latest due (past the cap too: it is counted anyway), run-once the earliest
//     found, run-all every one found;
//   - the watermark moves to the last found, or, when the walk stopped at the cap with more
//     occurrences still due, to now: the occurrences past the cap are dropped (counted as
//     missed) in every policy, so maxCatchUp bounds the whole catch-up, not one round of it.
func walk(sched cron.Schedule, policy Policy, maxCatchUp int, watermark, now time.Time) plan {
	var found []time.Time
	t := watermark
	for len(found) < maxCatchUp {
		n := sched.Next(t)
		if n.IsZero() || n.After(now) {
			break
		}
		found = append(found, n)
		t = n
	}
	if len(found) == 0 {
		return plan{}
	}
	p := plan{to: found[len(found)-1]}
	var past int64
	latest := p.to // the latest due occurrence the walk and the count reached
	for n := sched.Next(t); !n.IsZero() && !n.After(now) && past < countLimit; n = sched.Next(n) {
		past++
		latest = n
	}
	if past > 0 {
		p.to = now
	}
	switch policy {
	case RunOnce:
		p.fire = found[:1]
		p.missed = int64(len(found)-1) + past
	case RunAll:
		p.fire = found
		p.missed = past
	default:
		// The latest due occurrence, past the cap too: skip's promise is that a catch-up runs
		// the schedule's most recent occurrence (the count's floor past countLimit).
		p.fire = []time.Time{latest}
		p.missed = int64(len(found)-1) + past
	}
	return p
}

// upcoming returns the next n occurrences after t, in the schedule's zone.
func upcoming(c *compiled, t time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for len(out) < n {
		t = c.sched.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t.In(c.loc))
	}
	return out
}
