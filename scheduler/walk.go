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
		if !advances(n, t) || n.After(now) {
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
	for n := sched.Next(t); advances(n, t) && !n.After(now) && past < countLimit; t, n = n, sched.Next(n) {
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

// advances reports whether n, the Next of t, is an occurrence after t. Zero is "no next
// occurrence". One at or before t is a Next that does not advance: treated as none, so no loop
// over the occurrences can spin on it, fire before the watermark, move the watermark back or
// count one instant as missed over and over.
func advances(n, t time.Time) bool { return !n.IsZero() && n.After(t) }

// upcoming returns the next n occurrences after t, in the schedule's zone.
func upcoming(c *compiled, t time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for len(out) < n {
		next := c.sched.Next(t)
		if !advances(next, t) {
			break
		}
		t = next
		out = append(out, t.In(c.loc))
	}
	return out
}

// nextFires returns the schedule's next n fires after now, given its watermark (zero when no
// leader has seen it yet). A cron spec's occurrences do not depend on where the walk starts.
// "@every d" fires every d from the watermark, so its fires after now are on that grid; a
// schedule not yet seen gets its watermark at now, and one ahead of the clock is pulled back to
// now, so their grid starts at now.
func nextFires(c *compiled, watermark, now time.Time, n int) []time.Time {
	from := now
	if every, ok := c.sched.(cron.ConstantDelaySchedule); ok && every.Delay > 0 && !watermark.IsZero() && !watermark.After(now) {
		// The last point of the grid at or before now, computed rather than walked: a paused
		// "@every 1s" may be a year behind.
		from = watermark.Add(now.Sub(watermark) / every.Delay * every.Delay)
	}
	return upcoming(c, from, n)
}
