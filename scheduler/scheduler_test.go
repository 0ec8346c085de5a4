package scheduler_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

func TestDefineRefusesBadValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		what, spec, tz string
		opts           []scheduler.Option
	}{
		{"a city that is not a zone", "0 3 * * *", "Bogota", nil},
		{"no zone", "0 3 * * *", "", nil},
		{"the machine's zone", "0 3 * * *", "Local", nil},
		{"a made-up zone", "0 3 * * *", "Mars/Olympus", nil},
		{"not a spec", "every day at three", "UTC", nil},
		{"a minute out of range", "61 * * * *", "UTC", nil},
		{"six fields", "0 0 3 * * *", "UTC", nil},
		{"an empty spec", " ", "UTC", nil},
		{"a zone in the spec", "TZ=UTC 0 3 * * *", "UTC", nil},
		{"a zone in the spec without a space", "CRON_TZ=UTC", "UTC", nil},
		{"an unknown descriptor", "@fortnightly", "UTC", nil},
		{"a spec that never fires", "0 0 30 2 *", "UTC", nil},
		{"a negative period", "@every -1h", "UTC", nil},
		{"a zero period", "@every 0s", "UTC", nil},
		{"a period under a second", "@every 1ms", "UTC", nil},
		{"a period of a fraction of seconds", "@every 1500ms", "UTC", nil},
		{"maxCatchUp 0", "@hourly", "UTC", []scheduler.Option{scheduler.MaxCatchUp(0)}},
		{"maxCatchUp negative", "@hourly", "UTC", []scheduler.Option{scheduler.MaxCatchUp(-3)}},
		{"an unknown policy", "@hourly", "UTC", []scheduler.Option{scheduler.CatchUp("all-of-them")}},
	}
	for _, c := range cases {
		_, err := scheduler.Define("s", pingJob, c.spec, c.tz, Ping{}, c.opts...)
		if !jobs.HasCode(err, jobs.CodeJobDefinition) {
			t.Errorf("%s (%q in %q): %v, want %s", c.what, c.spec, c.tz, err, jobs.CodeJobDefinition)
		}
	}
	if _, err := scheduler.Define("s", nil, "@hourly", "UTC", Ping{}); !jobs.HasCode(err, jobs.CodeJobDefinition) {
		t.Errorf("no job: %v", err)
	}
	// A plain-data schedule (as a remote declaration arrives) is held to the same rules.
	for what, s := range map[string]scheduler.Schedule{
		"no tenant":        {Name: "s", Spec: "@hourly", TZ: "UTC", Job: "ping"},
		"no job":           {Name: "s", Spec: "@hourly", TZ: "UTC", NoTenant: true},
		"no name":          {Spec: "@hourly", TZ: "UTC", Job: "ping", NoTenant: true},
		"bad input":        {Name: "s", Spec: "@hourly", TZ: "UTC", Job: "ping", NoTenant: true, Input: []byte{0xc1}},
		"a bad zone":       {Name: "s", Spec: "@hourly", TZ: "Bogota", Job: "ping", NoTenant: true},
		"negative maxCUp":  {Name: "s", Spec: "@hourly", TZ: "UTC", Job: "ping", NoTenant: true, MaxCatchUp: -1},
		"an @ in the name": {Name: "s@manual", Spec: "@hourly", TZ: "UTC", Job: "ping", NoTenant: true},
		"a long name":      {Name: strings.Repeat("n", 901), Spec: "@hourly", TZ: "UTC", Job: "ping", NoTenant: true},
		"a NUL in the job": {Name: "s", Spec: "@hourly", TZ: "UTC", Job: "pi\x00ng", NoTenant: true},
	} {
		if err := s.Validate(); !jobs.HasCode(err, jobs.CodeJobDefinition) {
			t.Errorf("%s: Validate = %v, want %s", what, err, jobs.CodeJobDefinition)
		}
	}
	for _, ok := range []struct{ spec, tz string }{
		{"0 3 * * *", "Europe/Berlin"}, {"@hourly", "UTC"}, {"@daily", "America/Bogota"},
		{"*/15 9-17 * * mon-fri", "Asia/Tokyo"}, {"@every 90m", "UTC"}, {"0 0 29 2 *", "UTC"},
	} {
		if _, err := scheduler.Define("s", pingJob, ok.spec, ok.tz, Ping{}); err != nil {
			t.Errorf("%q in %q refused: %v", ok.spec, ok.tz, err)
		}
	}
}

func TestScheduleIsPlainData(t *testing.T) {
	t.Parallel()
	s := define(t, "nightly", "0 3 * * *", "Europe/Berlin", scheduler.CatchUp(scheduler.RunAll), scheduler.MaxCatchUp(4))
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back scheduler.Schedule
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Checksum() != s.Checksum() || back.Validate() != nil {
		t.Errorf("the JSON round trip changed the schedule: %s\n%+v\n%+v", b, s, back)
	}
	if back.Job != "ping" || !back.NoTenant || back.Policy != scheduler.RunAll || back.MaxCatchUp != 4 || back.Queue != jobs.DefaultQueue {
		t.Errorf("declaration %+v", back)
	}
	var in Ping
	if err := jobs.Decode(back.Input, &in); err != nil || in.Note != "nightly" {
		t.Errorf("input %+v, %v", in, err)
	}
	// Defaults left empty are the same schedule as defaults named.
	plain := scheduler.Schedule{Name: "n", Spec: "@hourly", TZ: "UTC", Job: "ping", NoTenant: true}
	named := plain
	named.Policy, named.MaxCatchUp, named.Queue = scheduler.Skip, scheduler.DefaultMaxCatchUp, jobs.DefaultQueue
	named.Input, _ = jobs.Encode(nil)
	if plain.Checksum() != named.Checksum() {
		t.Error("a schedule with its defaults named has another checksum")
	}
	changed := plain
	changed.Spec = "@daily"
	if changed.Checksum() == plain.Checksum() {
		t.Error("a changed spec kept the checksum")
	}
}

// A long outage (30 hourly occurrences missed) with maxCatchUp 10: the walk finds the first 10,
// and every policy drops what lies past the cap; skip fires the latest missed all the same.
func TestCatchUpAfterLongOutage(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		skip := define(t, "skip", "0 * * * *", "UTC")
		once := define(t, "once", "0 * * * *", "UTC", scheduler.CatchUp(scheduler.RunOnce))
		all := define(t, "all", "0 * * * *", "UTC", scheduler.CatchUp(scheduler.RunAll))
		s := start(t, env, "a", skip, once, all)
		tick(t, s) // first seen at t0: the watermark is now, nothing fires retroactively
		for _, n := range []string{"skip", "once", "all"} {
			wantFired(t, env, n, nil)
		}
		env.Fake().Set(t0.Add(30*time.Hour + 30*time.Minute)) // down: t0+1h … t0+30h are due
		tick(t, s)
		wantFired(t, env, "skip", keys("skip", 30*time.Hour)) // the latest missed, past the cap
		wantFired(t, env, "once", keys("once", time.Hour))    // the earliest, once
		wantFired(t, env, "all", keys("all", hours(1, 10)...))
		for n, missed := range map[string]int64{"skip": 29, "once": 29, "all": 20} {
			in := info(t, s, n)
			if in.Missed != missed {
				t.Errorf("%s: missed %d, want %d", n, in.Missed, missed)
			}
			if in.Watermark == nil || !in.Watermark.Equal(t0.Add(30*time.Hour+30*time.Minute)) {
				t.Errorf("%s: watermark %v, want past every missed occurrence", n, in.Watermark)
			}
		}
		// The catch-up is over: the next round fires nothing, the next occurrence fires once.
		tick(t, s)
		env.Fake().Set(t0.Add(31 * time.Hour))
		tick(t, s)
		tick(t, s)
		wantFired(t, env, "skip", keys("skip", 30*time.Hour, 31*time.Hour))
		wantFired(t, env, "once", keys("once", time.Hour, 31*time.Hour))
		wantFired(t, env, "all", keys("all", append(hours(1, 10), 31*time.Hour)...))
		if in := info(t, s, "once"); in.LastFire == nil || !in.LastFire.Equal(t0.Add(31*time.Hour)) {
			t.Errorf("once: last fire %v", in.LastFire)
		}
	})
}

// An outage shorter than the cap: nothing lies past it, so the policies differ only in what they
// fire of the occurrences found.
func TestCatchUpWithinTheCap(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	skip := define(t, "skip", "0 * * * *", "UTC", scheduler.MaxCatchUp(6))
	once := define(t, "once", "0 * * * *", "UTC", scheduler.CatchUp(scheduler.RunOnce), scheduler.MaxCatchUp(6))
	all := define(t, "all", "0 * * * *", "UTC", scheduler.CatchUp(scheduler.RunAll), scheduler.MaxCatchUp(6))
	capped := define(t, "capped", "0 * * * *", "UTC", scheduler.CatchUp(scheduler.RunAll), scheduler.MaxCatchUp(2))
	s := start(t, env, "a", skip, once, all, capped)
	tick(t, s)
	env.Fake().Set(t0.Add(5*time.Hour + time.Minute))
	tick(t, s)
	tick(t, s)
	wantFired(t, env, "skip", keys("skip", 5*time.Hour))
	wantFired(t, env, "once", keys("once", time.Hour))
	wantFired(t, env, "all", keys("all", hours(1, 5)...))
	wantFired(t, env, "capped", keys("capped", hours(1, 2)...))
	for n, missed := range map[string]int64{"skip": 4, "once": 4, "all": 0, "capped": 3} {
		if in := info(t, s, n); in.Missed != missed {
			t.Errorf("%s: missed %d, want %d", n, in.Missed, missed)
		}
	}
	// run-once moved its watermark past the rest: the next hour fires only that hour.
	env.Fake().Set(t0.Add(6 * time.Hour))
	tick(t, s)
	wantFired(t, env, "once", keys("once", time.Hour, 6*time.Hour))
}

// A new Scheduler over the same store (an engine restart, or a failover after a crash) neither
// fires again what was fired nor misses what came due while nobody ran.
func TestWatermarkSurvivesRestart(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		all := define(t, "all", "0 * * * *", "UTC", scheduler.CatchUp(scheduler.RunAll))
		a := start(t, env, "a", all)
		tick(t, a)
		env.Fake().Set(t0.Add(time.Hour))
		tick(t, a)
		wantFired(t, env, "all", keys("all", time.Hour))
		// A clean restart: a releases the lease; b leads at once and fires nothing again.
		if err := a.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		b := start(t, env, "b", all)
		tick(t, b)
		if !b.Leading() {
			t.Fatal("b does not lead after a released the lease")
		}
		wantFired(t, env, "all", keys("all", time.Hour))
		// A crash: b stops ticking without releasing. c waits for b's lease to lapse, then fires
		// what came due meanwhile, once.
		env.Fake().Set(t0.Add(time.Hour + 5*time.Second))
		c := start(t, env, "c", all)
		tick(t, c)
		if c.Leading() {
			t.Fatal("c leads while b's lease runs")
		}
		env.Fake().Set(t0.Add(3*time.Hour + 10*time.Second))
		tick(t, c)
		tick(t, c)
		if !c.Leading() {
			t.Fatal("c does not lead after b's lease lapsed")
		}
		wantFired(t, env, "all", keys("all", hours(1, 3)...))
	})
}

// Two schedulers on one store, ticking concurrently every minute, the leader abandoned
// (killed: it never releases) every 7 minutes: every occurrence fires exactly once.
func TestTwoSchedulersFireEachOccurrenceOnce(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		env2 := testenv.Start(t, testenv.Options{Store: env.Store, Clock: env.Clock, Logger: env.Logger})
		every := define(t, "every", "* * * * *", "UTC", scheduler.CatchUp(scheduler.RunAll))
		envs := []*testenv.Env{env, env2}
		nodes := []*scheduler.Scheduler{start(t, env, "n0", every), start(t, env2, "n1", every)}
		for _, n := range nodes { // first seen at t0
			tick(t, n)
		}
		gen := 1
		var want []time.Duration
		for m := 1; m <= 40; m++ {
			env.Fake().Set(t0.Add(time.Duration(m) * time.Minute))
			want = append(want, time.Duration(m)*time.Minute)
			var wg sync.WaitGroup
			for _, n := range nodes {
				wg.Add(1)
				go func() { defer wg.Done(); _ = n.Tick(context.Background()) }()
			}
			wg.Wait()
			leaders := 0
			for _, n := range nodes {
				if n.Leading() {
					leaders++
				}
			}
			if leaders > 1 {
				t.Fatalf("minute %d: %d nodes lead", m, leaders)
			}
			if m%7 == 0 {
				// Kill the leader: it is replaced by a new node that has to wait for the lease.
				for i, n := range nodes {
					if n.Leading() {
						gen++
						nodes[i] = start(t, envs[i], "n"+string(rune('a'+gen)), every)
					}
				}
			}
		}
		env.Fake().Set(t0.Add(41 * time.Minute))
		for _, n := range nodes {
			tick(t, n)
		}
		want = append(want, 41*time.Minute)
		wantFired(t, env, "every", keys("every", want...))
	})
}

// racingStore lets a test act between a leader's round and its commit: the split brain.
type racingStore struct {
	store.Store
	once   sync.Once
	before func()
}

func (r *racingStore) ScheduleFire(ctx context.Context, p store.ScheduleFireParams) ([]store.CreateRunResult, error) {
	if p.Holder == "a" {
		r.once.Do(r.before)
	}
	return r.Store.ScheduleFire(ctx, p)
}

// A leader whose lease lapsed while it was in a round (a long GC pause) dispatches late, after
// another node took over and fired the same occurrence: its commit is refused and changes
// nothing, and it learns it no longer leads.
func TestDemotedLeaderLateDispatchCommitsNothing(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		race := &racingStore{Store: env.Store}
		envA := testenv.Start(t, testenv.Options{Store: race, Clock: env.Clock, Logger: env.Logger})
		hourly := define(t, "hourly", "0 * * * *", "UTC")
		a := start(t, envA, "a", hourly)
		b := start(t, env, "b", hourly)
		tick(t, a) // a leads; the watermark is t0
		race.before = func() {
			env.Fake().Set(t0.Add(time.Hour + 20*time.Second)) // a's 15s lease lapsed
			tick(t, b)
			if !b.Leading() {
				t.Error("b did not take the lapsed lease")
			}
		}
		// a's last renewal: just before it lapses, then a pauses inside the round.
		env.Fake().Set(t0.Add(time.Hour + time.Second))
		tick(t, a)
		wantFired(t, env, "hourly", keys("hourly", time.Hour))
		runs, _ := env.Engine.ListRuns(context.Background(), store.ListParams{Job: "ping"})
		if len(runs) != 1 {
			t.Errorf("%d runs, want 1", len(runs))
		}
		if a.Leading() {
			t.Error("a still believes it leads after its fire was refused")
		}
	})
}

func TestPauseResumeTrigger(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		hourly := define(t, "hourly", "0 * * * *", "UTC", scheduler.CatchUp(scheduler.RunAll))
		s := start(t, env, "a", hourly)
		tick(t, s)
		if _, err := s.Pause(ctx, "nope"); !jobs.HasCode(err, jobs.CodeScheduleNotFound) {
			t.Errorf("pause of an undeclared schedule: %v", err)
		}
		if _, err := s.Trigger(ctx, "nope"); !jobs.HasCode(err, jobs.CodeScheduleNotFound) {
			t.Errorf("trigger of an undeclared schedule: %v", err)
		}
		in, err := s.Pause(ctx, "hourly")
		if err != nil || !in.Paused {
			t.Fatalf("Pause = %+v, %v", in, err)
		}
		env.Fake().Set(t0.Add(3*time.Hour + 30*time.Minute))
		tick(t, s)
		wantFired(t, env, "hourly", nil)
		// A trigger fires now even while paused, recorded as manual; the watermark stays.
		before := info(t, s, "hourly").Watermark
		res, err := s.Trigger(ctx, "hourly")
		if err != nil {
			t.Fatal(err)
		}
		run, err := env.Engine.GetRun(ctx, res.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if run.EnqueuedBy != "schedule:hourly:manual" || !strings.HasPrefix(run.Key, "hourly@manual@") {
			t.Errorf("the manual run: key %q, enqueued by %q", run.Key, run.EnqueuedBy)
		}
		if after := info(t, s, "hourly").Watermark; !after.Equal(*before) {
			t.Errorf("trigger moved the watermark from %v to %v", before, after)
		}
		// Resume: the occurrences of the pause are skipped, not caught up; the next one fires.
		in, err = s.Resume(ctx, "hourly")
		if err != nil || in.Paused || in.Missed != 0 {
			t.Fatalf("Resume = %+v, %v", in, err)
		}
		tick(t, s)
		wantFired(t, env, "hourly", nil)
		env.Fake().Set(t0.Add(4 * time.Hour))
		tick(t, s)
		wantFired(t, env, "hourly", keys("hourly", 4*time.Hour))
		// A trigger does not take the next occurrence's place.
		env.Fake().Set(t0.Add(4*time.Hour + 10*time.Minute))
		if _, err := s.Trigger(ctx, "hourly"); err != nil {
			t.Fatal(err)
		}
		env.Fake().Set(t0.Add(5 * time.Hour))
		tick(t, s)
		wantFired(t, env, "hourly", keys("hourly", 4*time.Hour, 5*time.Hour))
	})
}

func TestInspectAndMetrics(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	reg := prometheus.NewRegistry()
	daily := define(t, "daily", "0 3 * * *", "Europe/Berlin", scheduler.CatchUp(scheduler.RunOnce), scheduler.MaxCatchUp(3))
	bad := scheduler.Schedule{Name: "bad", Spec: "0 3 * * *", TZ: "Bogota", Job: "ping", NoTenant: true}
	s, err := scheduler.New(scheduler.Config{Engine: env.Engine, Schedules: scheduler.Static(daily, bad), ID: "a",
		Registerer: reg, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, s)
	env.Fake().Set(t0.Add(5 * 24 * time.Hour)) // 5 days down: 3 found by the walk, 2 past it
	tick(t, s)
	all, err := s.Inspect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Name != "bad" || all[1].Name != "daily" {
		t.Fatalf("Inspect = %+v", all)
	}
	if !strings.Contains(all[0].Error, "Bogota") {
		t.Errorf("the refused declaration shows error %q", all[0].Error)
	}
	in := all[1]
	berlin, _ := time.LoadLocation("Europe/Berlin")
	firstMissed := time.Date(2026, 1, 6, 3, 0, 0, 0, berlin)
	if in.LastFire == nil || !in.LastFire.Equal(firstMissed) || in.Missed != 4 || in.TZ != "Europe/Berlin" || in.Policy != scheduler.RunOnce {
		t.Errorf("daily: %+v (last fire %v)", in, in.LastFire)
	}
	if len(in.Next) != 5 || !in.Next[0].Equal(time.Date(2026, 1, 11, 3, 0, 0, 0, berlin)) || in.Next[0].Location().String() != "Europe/Berlin" {
		t.Errorf("next fires %v", in.Next)
	}
	want := `
# HELP jobs_schedule_missed_total Occurrences a schedule's catch-up policy dropped after downtime.
# TYPE jobs_schedule_missed_total counter
jobs_schedule_missed_total{schedule="daily"} 4
# HELP jobs_schedule_last_fire_timestamp_seconds The latest occurrence a schedule fired (unix seconds); 0 before its first.
# TYPE jobs_schedule_last_fire_timestamp_seconds gauge
jobs_schedule_last_fire_timestamp_seconds{schedule="daily"} ` + jsonNumber(firstMissed.Unix()) + `
# HELP jobs_scheduler_leader 1 when this engine's scheduler holds the leader lease, else 0.
# TYPE jobs_scheduler_leader gauge
jobs_scheduler_leader 1
# HELP jobs_scheduler_clock_behind_total Schedule watermarks this engine's scheduler found ahead of its clock, set by a round on a clock that ran ahead, and pulled back to now.
# TYPE jobs_scheduler_clock_behind_total counter
jobs_scheduler_clock_behind_total 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func jsonNumber(n int64) string {
	b, _ := json.Marshal(float64(n))
	return string(b)
}

// SIGTERM drains: Stop waits for the round in flight to commit, then releases the lease, so
// another node leads at its very next round instead of after the lease lapses.
func TestStopFinishesTheRoundAndReleases(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	race := &racingStore{Store: env.Store}
	envA := testenv.Start(t, testenv.Options{Store: race, Clock: env.Clock, Logger: env.Logger})
	hourly := define(t, "hourly", "0 * * * *", "UTC")
	a := start(t, envA, "a", hourly)
	b := start(t, env, "b", hourly)
	tick(t, a)
	entered, proceed := make(chan struct{}), make(chan struct{})
	race.before = func() { close(entered); <-proceed }
	env.Fake().Set(t0.Add(time.Hour))
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-entered // a's loop is inside its round, about to commit the fire
	stopped := make(chan error, 1)
	go func() { stopped <- a.Stop(context.Background()) }()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) with a round in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(proceed)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	wantFired(t, env, "hourly", keys("hourly", time.Hour))
	tick(t, b)
	if !b.Leading() {
		t.Error("b does not lead right after a stopped: the lease was not released")
	}
}
