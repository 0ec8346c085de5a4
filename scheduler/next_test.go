package scheduler

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

// referenceMatch is the definition Next implements, read off the clock directly: the instant's
// wall time in the zone names the spec's minute, hour, day and month (at second 0).
func referenceMatch(s *cron.SpecSchedule, loc *time.Location, at time.Time) bool {
	l := at.In(loc)
	return l.Second() == 0 && s.Minute&(1<<uint(l.Minute())) != 0 && s.Hour&(1<<uint(l.Hour())) != 0 &&
		s.Month&(1<<uint(l.Month())) != 0 && dayMatches(s, l.Year(), l.Month(), l.Day())
}

// Next against a minute-by-minute reference, in zones with every kind of offset change (whole
// hours, 30 minutes, at a quarter past, two hours, none) and specs on and around the switch
// hours, over 2026–2027. Each window (a day and more around every transition, and random days)
// is enumerated minute by minute; the chain of Next from the window's start must give exactly
// the matches, and Next from random instants inside it (whole seconds or not, on an occurrence
// or not) the first match strictly after.
func TestNextMatchesMinuteByMinute(t *testing.T) {
	t.Parallel()
	zones := []string{"Australia/Lord_Howe", "Pacific/Chatham", "Antarctica/Troll", "Europe/Berlin",
		"America/New_York", "Asia/Kolkata", "Australia/Adelaide", "America/St_Johns"}
	specs := []string{"0 0 * * *", "30 2 * * *", "45 3 * * *", "0 * * * *", "*/15 1-3 * * *", "30 1 * * 0", "0 2 1,4,5 * *",
		"0 0 1 * 1"} // the last: the 1st or a Monday
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	checked := 0 // occurrences compared, so the test cannot pass by comparing nothing
	for _, tz := range zones {
		loc, err := time.LoadLocation(tz)
		if err != nil {
			t.Fatal(err)
		}
		var windows []time.Time // starts; each window is 30 hours
		for x := from; ; {
			_, end := x.In(loc).ZoneBounds()
			if end.IsZero() || !end.Before(to) {
				break
			}
			windows = append(windows, end.Add(-15*time.Hour))
			x = end
		}
		for range 8 {
			windows = append(windows, from.Add(time.Duration(rng.Int64N(int64(to.Sub(from)))).Truncate(time.Minute)))
		}
		for _, spec := range specs {
			c, err := Schedule{Name: "x", Spec: spec, TZ: tz, Job: "j", NoTenant: true}.compile()
			if err != nil {
				t.Fatal(err)
			}
			ss := c.sched.(zoned).spec
			for _, w := range windows {
				end := w.Add(30 * time.Hour)
				var want []time.Time
				for m := w.Add(time.Minute); m.Before(end); m = m.Add(time.Minute) {
					if referenceMatch(ss, loc, m) {
						want = append(want, m)
					}
				}
				n := c.sched.Next(w)
				for _, r := range want {
					if !n.Equal(r) {
						t.Fatalf("%s %q: chain from %s: Next gave %s, want %s", tz, spec, w.UTC(), n.UTC(), r.UTC())
					}
					n = c.sched.Next(n)
					checked++
				}
				if !n.IsZero() && n.Before(end) {
					t.Fatalf("%s %q: chain from %s: Next gave %s, which the reference does not match", tz, spec, w.UTC(), n.UTC())
				}
				for range 20 {
					at := w.Add(time.Duration(rng.Int64N(int64(24 * time.Hour))))
					if rng.IntN(3) == 0 {
						at = at.Truncate(15 * time.Minute)
					}
					got := c.sched.Next(at)
					if !got.After(at) {
						t.Fatalf("%s %q: Next(%s) = %s, not after it", tz, spec, at.UTC(), got.UTC())
					}
					for _, r := range want {
						if r.After(at) {
							if !got.Equal(r) {
								t.Fatalf("%s %q: Next(%s) = %s, want %s", tz, spec, at.UTC(), got.UTC(), r.UTC())
							}
							break
						}
					}
				}
			}
		}
	}
	t.Logf("%d occurrences compared", checked)
	if checked < 3000 {
		t.Errorf("only %d occurrences compared", checked)
	}
}

// A spec whose only day comes every eight years at worst is found; one that names no day that
// exists ends within the bounded search and reads as "no next occurrence".
func TestNextFarAndNever(t *testing.T) {
	t.Parallel()
	leap, err := Schedule{Name: "x", Spec: "0 0 29 2 *", TZ: "Pacific/Chatham", Job: "j", NoTenant: true}.compile()
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := time.LoadLocation("Pacific/Chatham")
	got := leap.sched.Next(time.Date(2096, 3, 1, 0, 0, 0, 0, loc))
	if want := time.Date(2104, 2, 29, 0, 0, 0, 0, loc); !got.Equal(want) {
		t.Errorf("Feb 29 after 2096: %s, want %s", got, want)
	}
	// Feb 30 at midnight, any day of the week: Define refuses it, so it is built by hand.
	never := zoned{spec: &cron.SpecSchedule{Second: 1, Minute: 1, Hour: 1, Dom: 1 << 30, Month: 1 << 2,
		Dow: leap.sched.(zoned).spec.Dow, Location: loc}, loc: loc}
	start := time.Now()
	if n := never.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); !n.IsZero() {
		t.Errorf("Feb 30: Next = %s, want none", n)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Feb 30: the search took %s", d)
	}
	if _, err := (Schedule{Name: "x", Spec: "0 0 30 2 *", TZ: "UTC", Job: "j", NoTenant: true}).compile(); err == nil {
		t.Error("a spec that never fires was taken")
	}
}

// Past a zone's last listed transition Go computes them from the zone's rule, and there
// ZoneBounds reports, on the last day of a leap year, a span that ends at or before its
// argument. Next goes on through that day, every hour of it, to the day after.
func TestNextThroughTheLastDayOfALeapYear(t *testing.T) {
	t.Parallel()
	for _, tz := range []string{"Pacific/Chatham", "America/New_York", "Europe/Berlin"} {
		c, err := Schedule{Name: "x", Spec: "30 * * * *", TZ: tz, Job: "j", NoTenant: true}.compile()
		if err != nil {
			t.Fatal(err)
		}
		ss := c.sched.(zoned).spec
		from := time.Date(2040, 12, 30, 0, 0, 0, 0, time.UTC)
		n := from
		for m := from.Add(time.Minute); m.Before(from.Add(72 * time.Hour)); m = m.Add(time.Minute) {
			if !referenceMatch(ss, c.loc, m) {
				continue
			}
			if n = c.sched.Next(n); !n.Equal(m) {
				t.Fatalf("%s: Next gave %s, want %s", tz, n.UTC(), m.UTC())
			}
		}
	}
}
