package scheduler_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store/memory"
)

// stepFires steps the fake clock from begin to end (inclusive) every step, ticking at each, and
// returns the occurrences the schedule fired (RFC 3339, UTC), the scheduler, and its log.
func stepFires(t *testing.T, sc scheduler.Schedule, begin, end time.Time, step time.Duration) ([]string, *scheduler.Scheduler, *testenv.LogBuffer) {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	env.Fake().Set(begin)
	logs := &testenv.LogBuffer{}
	s, err := scheduler.New(scheduler.Config{Engine: env.Engine, Schedules: scheduler.Static(sc), ID: "a", Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	for now := begin; !now.After(end); now = now.Add(step) {
		env.Fake().Set(now)
		tick(t, s)
	}
	var got []string
	for _, k := range fired(t, env, sc.Name) {
		got = append(got, strings.TrimPrefix(k, sc.Name+"@"))
	}
	return got, s, logs
}

func utc(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The documented DST rules hold in zones whose offset changes by other than a whole hour on the
// hour. The wall times below are neither skipped nor repeated by the switch, so each fires once
// every day, the switch day included.
func TestDSTInZonesWithOddShifts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, tz, spec string
		begin, end     string // UTC
		want           []string
	}{
		// Lord Howe falls back 30 minutes, 02:00 (+11) -> 01:30 (+10:30), on 2026-04-05: local
		// midnight exists once every day.
		{"lordhowe-midnight", "Australia/Lord_Howe", "0 0 * * *", "2026-04-04T12:00:00Z", "2026-04-06T14:00:00Z",
			[]string{"2026-04-04T13:00:00Z", "2026-04-05T13:30:00Z", "2026-04-06T13:30:00Z"}},
		// 03:00 local, after the switch on its day.
		{"lordhowe-0300", "Australia/Lord_Howe", "0 3 * * *", "2026-04-03T15:00:00Z", "2026-04-05T17:00:00Z",
			[]string{"2026-04-03T16:00:00Z", "2026-04-04T16:30:00Z", "2026-04-05T16:30:00Z"}},
		// Lord Howe springs forward 02:00 (+10:30) -> 02:30 (+11) on 2026-10-04: 02:15 is skipped
		// that day, 02:45 is not.
		{"lordhowe-spring-0215", "Australia/Lord_Howe", "15 2 * * *", "2026-10-02T15:00:00Z", "2026-10-04T16:00:00Z",
			[]string{"2026-10-02T15:45:00Z", "2026-10-04T15:15:00Z"}},
		{"lordhowe-spring-0245", "Australia/Lord_Howe", "45 2 * * *", "2026-10-02T15:00:00Z", "2026-10-04T16:00:00Z",
			[]string{"2026-10-02T16:15:00Z", "2026-10-03T15:45:00Z", "2026-10-04T15:45:00Z"}},
		// Troll shifts by two hours at 01:00 UTC: +02 -> +00 on 2026-10-25, so 02:30 is read twice
		// that day and fires at both instants.
		{"troll-fall-0230", "Antarctica/Troll", "30 2 * * *", "2026-10-24T00:00:00Z", "2026-10-26T03:00:00Z",
			[]string{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-25T02:30:00Z", "2026-10-26T02:30:00Z"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, _, _ := stepFires(t, define(t, c.name, c.spec, c.tz, scheduler.CatchUp(scheduler.RunAll)),
				utc(t, c.begin), utc(t, c.end), 10*time.Minute)
			if !slices.Equal(got, c.want) {
				t.Errorf("%q in %s fired %v\nwant %v", c.spec, c.tz, got, c.want)
			}
		})
	}
}

// Chatham falls back 03:45 (+13:45) -> 02:45 (+12:45) on 2026-04-05 local, at 14:00Z on 04-04.
// A schedule first seen in the repeated hour, after the first 03:00 (13:15Z) and before the
// second (14:15Z), fires the second: nothing before it was first seen ("nothing fires
// retroactively"), no round refused for moving the watermark back, and the real occurrence not
// dropped.
func TestFirstSeenInARepeatedHourFiresNothingRetroactively(t *testing.T) {
	t.Parallel()
	begin := utc(t, "2026-04-04T14:05:00Z")
	got, s, logs := stepFires(t, define(t, "chatham", "0 3 * * *", "Pacific/Chatham", scheduler.CatchUp(scheduler.RunOnce)),
		begin, begin.Add(20*time.Minute), 5*time.Minute)
	if want := []string{"2026-04-04T14:15:00Z"}; !slices.Equal(got, want) {
		t.Errorf("fired %v after first seen at 14:05Z, want %v", got, want)
	}
	if in := info(t, s, "chatham"); in.Missed != 0 {
		t.Errorf("missed %d, want 0", in.Missed)
	}
	if l := logs.String(); strings.Contains(l, "fire-failed") {
		t.Errorf("a round was refused:\n%s", l)
	}
}

// A wall time at the very end of a repeated hour (Chatham's 03:45 on its fall-back day) is never
// read: the clock goes from 03:44:59 +13:45 to 02:45 +12:45. It fires once, when the clock next
// reads 03:45, and the walk counts no missed occurrences.
func TestRepeatedHourCountsNoPhantomMisses(t *testing.T) {
	t.Parallel()
	got, s, _ := stepFires(t, define(t, "chatham45", "45 3 * * *", "Pacific/Chatham"),
		utc(t, "2026-04-03T13:55:00Z"), utc(t, "2026-04-04T15:05:00Z"), 10*time.Minute)
	in := info(t, s, "chatham45")
	// 03:45 +13:45 on 04-04 local is 04-03T14:00Z; 03:45 +12:45 on 04-05 is 04-04T15:00Z.
	want := []string{"2026-04-03T14:00:00Z", "2026-04-04T15:00:00Z"}
	if !slices.Equal(got, want) || in.Missed != 0 {
		t.Errorf("fired %v, missed %d\nwant %v, missed 0", got, in.Missed, want)
	}
}

// "@every d" fires every d from the watermark, so Inspect's next fires are on that grid, not
// every d from now.
func TestInspectNextOfEveryFollowsTheWatermark(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	s := start(t, env, "a", define(t, "every", "@every 1h", "UTC"))
	tick(t, s) // first seen at t0: the watermark is t0
	env.Fake().Set(t0.Add(30*time.Minute + 17*time.Second))
	tick(t, s)
	want := []time.Time{t0.Add(time.Hour), t0.Add(2 * time.Hour), t0.Add(3 * time.Hour), t0.Add(4 * time.Hour), t0.Add(5 * time.Hour)}
	if in := info(t, s, "every"); !slices.EqualFunc(in.Next, want, time.Time.Equal) {
		t.Errorf("Inspect next %v\nwant %v (the watermark plus every hour)", in.Next, want)
	}
	env.Fake().Set(t0.Add(time.Hour))
	tick(t, s)
	wantFired(t, env, "every", keys("every", time.Hour))
	// Not yet seen: the watermark will be now, so the grid starts there.
	env2 := testenv.Start(t, testenv.Options{Store: memory.New()})
	env2.Fake().Set(t0.Add(17 * time.Second))
	s2 := start(t, env2, "b", define(t, "every", "@every 1h", "UTC"))
	if in := info(t, s2, "every"); len(in.Next) == 0 || !in.Next[0].Equal(t0.Add(time.Hour+17*time.Second)) {
		t.Errorf("not yet seen: Inspect next %v, want the first at now plus 1h", in.Next)
	}
}

// An engine serving remote workers runs the schedules their manifests declare. One that does
// not validate is refused by the scheduler like any other: logged once, shown in Inspect with its
// error, and the others run.
func TestRefusedManifestScheduleShowsInInspect(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	good := define(t, "good", "0 * * * *", "UTC")
	bad := scheduler.Schedule{Name: "bad", Spec: "0 3 * * *", TZ: "Bogota", Job: "ping", NoTenant: true}
	declareSchedules(t, env, "w1", good, bad)
	logs := &testenv.LogBuffer{}
	s, err := scheduler.New(scheduler.Config{Engine: env.Engine, Schedules: scheduler.FromManifest(env.Engine), ID: "a", Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	tick(t, s)
	tick(t, s)
	in, err := s.Get(context.Background(), "bad")
	if err != nil {
		t.Fatalf("Get(bad): %v; want the refused declaration", err)
	}
	if !strings.Contains(in.Error, "Bogota") {
		t.Errorf("Inspect shows bad with error %q, want the zone's refusal", in.Error)
	}
	if n := strings.Count(logs.String(), "jobs.scheduler.refused"); n != 1 {
		t.Errorf("the refusal was logged %d times over two rounds, want once", n)
	}
	env.Fake().Set(t0.Add(time.Hour))
	tick(t, s)
	wantFired(t, env, "good", keys("good", time.Hour))
}

// "." and ".." are dot segments in a URL path, and a lone "/" is escaped to a segment net/http's
// router reads as a trailing slash, so the schedule's routes could never address them: they are
// refused when the schedule is defined, and from data.
func TestDotNamesRefused(t *testing.T) {
	t.Parallel()
	for _, name := range []string{".", "..", "/"} {
		if _, err := scheduler.Define(name, pingJob, "0 * * * *", "UTC", Ping{}); !jobs.HasCode(err, jobs.CodeJobDefinition) {
			t.Errorf("Define(%q) = %v, want X_JOB_DEFINITION", name, err)
		}
		sc := scheduler.Schedule{Name: name, Spec: "0 * * * *", TZ: "UTC", Job: "ping", NoTenant: true}
		if err := sc.Validate(); !jobs.HasCode(err, jobs.CodeJobDefinition) {
			t.Errorf("Validate(%q) = %v, want X_JOB_DEFINITION", name, err)
		}
	}
	for _, name := range []string{"...", ".hidden", "a.b", "a/b", "//"} {
		if _, err := scheduler.Define(name, pingJob, "0 * * * *", "UTC", Ping{}); err != nil {
			t.Errorf("Define(%q) = %v, want it taken", name, err)
		}
	}
}
