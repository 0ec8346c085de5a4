package scheduler_test

import (
	"slices"
	"testing"
	"time"

	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store/memory"
)

// What fires around a DST switch, with the fake clock stepping every 10 minutes through the
// days around it (docs/architecture.md, "DST", states the same table):
//   - a wall time the switch skips (02:30 on a spring-forward day) fires zero times that day;
//   - a wall time the switch repeats (01:30 in New York, 02:30 in Berlin on a fall-back day)
//     fires twice, at both instants;
//   - an hourly schedule fires 23 times on the spring-forward day and 25 on the fall-back day;
//   - a wall time right after a fall-back (03:00 in Berlin) exists once and fires once.
func TestDST(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, tz, spec string
		from, to       string // the local days stepped through, inclusive
		want           []string
		count          int // when set, the number of fires in the switch day instead of want
		day            string
	}{
		{name: "ny-spring-0230", tz: "America/New_York", spec: "30 2 * * *", from: "2026-03-07", to: "2026-03-09",
			want: []string{"2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z"}},
		{name: "ny-fall-0130", tz: "America/New_York", spec: "30 1 * * *", from: "2026-10-31", to: "2026-11-02",
			want: []string{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"}},
		{name: "ny-spring-hourly", tz: "America/New_York", spec: "0 * * * *", from: "2026-03-08", to: "2026-03-08", count: 23},
		{name: "ny-fall-hourly", tz: "America/New_York", spec: "0 * * * *", from: "2026-11-01", to: "2026-11-01", count: 25},
		{name: "berlin-spring-0230", tz: "Europe/Berlin", spec: "30 2 * * *", from: "2026-03-28", to: "2026-03-30",
			want: []string{"2026-03-28T01:30:00Z", "2026-03-30T00:30:00Z"}},
		{name: "berlin-fall-0230", tz: "Europe/Berlin", spec: "30 2 * * *", from: "2026-10-24", to: "2026-10-26",
			want: []string{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"}},
		{name: "berlin-fall-0300", tz: "Europe/Berlin", spec: "0 3 * * *", from: "2026-10-25", to: "2026-10-25",
			want: []string{"2026-10-25T02:00:00Z"}},
		{name: "berlin-spring-hourly", tz: "Europe/Berlin", spec: "@hourly", from: "2026-03-29", to: "2026-03-29", count: 23},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			loc, err := time.LoadLocation(c.tz)
			if err != nil {
				t.Fatal(err)
			}
			day := func(s string) time.Time {
				d, err := time.ParseInLocation("2006-01-02", s, loc)
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			// The scheduler first sees the schedule a second before the first local midnight.
			begin, end := day(c.from).Add(-time.Second), day(c.to).AddDate(0, 0, 1)
			env := testenv.Start(t, testenv.Options{Store: memory.New()})
			env.Fake().Set(begin)
			s := start(t, env, "a", define(t, c.name, c.spec, c.tz, scheduler.CatchUp(scheduler.RunAll)))
			for now := begin; now.Before(end); now = now.Add(10 * time.Minute) {
				env.Fake().Set(now)
				tick(t, s)
			}
			env.Fake().Set(end.Add(-time.Second))
			tick(t, s)
			got := fired(t, env, c.name)
			if c.count > 0 {
				if len(got) != c.count {
					t.Errorf("%d fires on %s in %s, want %d: %v", len(got), c.from, c.tz, c.count, got)
				}
				return
			}
			var want []string
			for _, w := range c.want {
				want = append(want, c.name+"@"+w)
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("fired %v\nwant  %v", got, want)
			}
		})
	}
}
