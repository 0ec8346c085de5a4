package scheduler

import (
	"math/bits"
	"time"

	"github.com/robfig/cron/v3"
)

// zoned is a cron spec read in a zone: its occurrences are the instants at which the zone's
// wall clock reads a time the spec names. robfig/cron parses the spec into its field sets, but
// its own Next is not used: it walks the fields by adding hours and minutes to a local time and
// assumes every offset change is a whole hour on the hour. In a zone that shifts by 30 minutes
// (Australia/Lord_Howe), at a quarter past (Pacific/Chatham) or by two hours (Antarctica/Troll)
// it skips occurrences, returns instants at or before its argument, or stops advancing.
//
// Defined on instants, the documented DST rules follow with no special case: a wall time the
// switch skips is never read on the clock, so it does not fire that day; a wall time the switch
// repeats is read twice, so it fires at both instants.
type zoned struct {
	spec *cron.SpecSchedule
	loc  *time.Location
}

// searchYears bounds the search for the next occurrence. The longest gap between two
// occurrences of a spec that fires at all is Feb 29 across a century year that is not a leap
// year (2096 to 2104); a spec that finds nothing within the bound never fires (Feb 30).
const searchYears = 10

// Next returns the first occurrence strictly after t, in the schedule's zone, or the zero time
// when there is none within searchYears.
//
// Between two of the zone's transitions the offset is constant, so there the wall clock is the
// instant shifted by it, and the first instant of that span whose wall time matches is the first
// matching wall time at or after the span's start, shifted back, when it still falls inside the
// span. Next walks the spans from t: a handful of them per year, each searched field by field.
func (z zoned) Next(t time.Time) time.Time {
	// Cron's resolution is the second: the candidates are whole seconds after t.
	x := t.Truncate(time.Second).Add(time.Second)
	limit := x.AddDate(searchYears, 0, 0)
	for x.Before(limit) {
		lt := x.In(z.loc)
		_, off := lt.Zone()
		end := spanEnd(lt, off)
		// The span's wall clock as a zone-free time: UTC has no transitions to get in the way.
		wall := time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), lt.Minute(), lt.Second(), 0, time.UTC)
		w := z.nextWall(wall)
		if w.IsZero() {
			return time.Time{}
		}
		at := w.Add(-time.Duration(off) * time.Second)
		if end.IsZero() || at.Before(end) {
			return at.In(z.loc)
		}
		// The span ends before its wall clock reaches the match (the match is skipped, or lies
		// in a later span): go on from its end, which is after x, so this advances.
		x = end
	}
	return time.Time{}
}

// spanEnd returns the end of the span of lt's offset off (zero: it never ends): the instant the
// zone next changes, or any earlier instant after lt up to which off holds.
//
// ZoneBounds gives it, except that past the zone's last listed transition (where Go computes
// the transitions from the zone's rule) it returns, for the last day of a leap year, an end at
// or before lt (2040-12-31T00:00Z in every zone with DST): trusted, Next would never move on.
// There the end is found by probing the offset hour by hour for two days, and to the second
// where it changes; a zone changes its offset at most a few times a year.
func spanEnd(lt time.Time, off int) time.Time {
	_, end := lt.ZoneBounds()
	if end.IsZero() || end.After(lt) {
		return end
	}
	offsetAt := func(t time.Time) int { _, o := t.In(lt.Location()).Zone(); return o }
	lo := lt
	for range 48 {
		hi := lo.Add(time.Hour)
		if offsetAt(hi) == off {
			lo = hi
			continue
		}
		// off holds at lo and not at hi: the change is in (lo, hi].
		for hi.Sub(lo) > time.Second {
			mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
			if !mid.After(lo) {
				break
			}
			if offsetAt(mid) == off {
				lo = mid
			} else {
				hi = mid
			}
		}
		return hi
	}
	return lo
}

// nextWall returns the first wall time at or after w (a zone-free time, whole seconds) whose
// fields the spec names, or the zero time when there is none within searchYears. It walks the
// months the spec names, their days, then hours, minutes and seconds by the field sets, so a
// search costs at most a few hundred steps however far the match is.
func (z zoned) nextWall(w time.Time) time.Time {
	s := z.spec
	y, mo, d := w.Date()
	h, mi, sec := w.Clock()
	for limit := y + searchYears; y <= limit; {
		if m := nextBit(s.Month, int(mo), 12); m != int(mo) {
			// Another month: it starts at its first day and the day's first second.
			if m < 0 {
				y, mo = y+1, time.January
			} else {
				mo = time.Month(m)
			}
			d, h, mi, sec = 1, 0, 0, 0
			continue
		}
		for last := daysIn(y, mo); d <= last; d, h, mi, sec = d+1, 0, 0, 0 {
			if !dayMatches(s, y, mo, d) {
				continue
			}
			if hh, mm, ss, ok := nextClock(s, h, mi, sec); ok {
				return time.Date(y, mo, d, hh, mm, ss, 0, time.UTC)
			}
		}
		if mo == time.December {
			y, mo = y+1, time.January
		} else {
			mo++
		}
		d, h, mi, sec = 1, 0, 0, 0
	}
	return time.Time{}
}

// nextClock returns the first time of day at or after h:mi:sec that the spec's hour, minute and
// second sets name, or false when the day has none left.
func nextClock(s *cron.SpecSchedule, h, mi, sec int) (int, int, int, bool) {
	for hh := nextBit(s.Hour, h, 23); hh >= 0; hh = nextBit(s.Hour, hh+1, 23) {
		m0 := 0
		if hh == h {
			m0 = mi
		}
		for mm := nextBit(s.Minute, m0, 59); mm >= 0; mm = nextBit(s.Minute, mm+1, 59) {
			s0 := 0
			if hh == h && mm == mi {
				s0 = sec
			}
			if ss := nextBit(s.Second, s0, 59); ss >= 0 {
				return hh, mm, ss, true
			}
		}
	}
	return 0, 0, 0, false
}

// nextBit returns the smallest value in [from, max] whose bit is set in set, or -1. The top bit
// of robfig's sets marks a '*' and is never a value.
func nextBit(set uint64, from, max int) int {
	if from > max {
		return -1
	}
	v := set &^ (1<<uint(from) - 1) & (1<<uint(max+1) - 1)
	if v == 0 {
		return -1
	}
	return bits.TrailingZeros64(v)
}

// dayMatches is cron's day rule, as robfig's parser sets it up: when either day field is a '*',
// a day must match both; otherwise (both restricted) either.
func dayMatches(s *cron.SpecSchedule, y int, mo time.Month, d int) bool {
	const star = 1 << 63
	dom := s.Dom&(1<<uint(d)) != 0
	dow := s.Dow&(1<<uint(time.Date(y, mo, d, 0, 0, 0, 0, time.UTC).Weekday())) != 0
	if s.Dom&star != 0 || s.Dow&star != 0 {
		return dom && dow
	}
	return dom || dow
}

func daysIn(y int, mo time.Month) int {
	return time.Date(y, mo+1, 0, 0, 0, 0, 0, time.UTC).Day()
}
