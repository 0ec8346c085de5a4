package scheduler_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store/memory"
)

// jumpClock is a node's clock: true time (a Fake, which only moves forward) plus an error the
// test sets, as a clock that jumped ahead and is corrected.
type jumpClock struct {
	*clock.Fake
	off atomic.Int64
}

func newJumpClock() *jumpClock { return &jumpClock{Fake: clock.NewFake(t0)} }

func (c *jumpClock) Now() time.Time { return c.Fake.Now().Add(time.Duration(c.off.Load())) }

// at sets true time to t0+d and the clock's error to off.
func (c *jumpClock) at(d, off time.Duration) {
	c.Fake.Set(t0.Add(d))
	c.off.Store(int64(off))
}

// The leader's clock jumps a day ahead for one round (a VM resumed with a stale clock, a bad NTP
// step) and is corrected. That round advanced the watermark to its clock's now, a day ahead;
// trusted, it would silence the hourly schedule for the next 23 real hours on every node. The
// next round pulls it back to now, says so (jobs.scheduler.clock-behind, counted), and the
// occurrences after the corrected now fire at their time. The occurrences the jumped round fired
// early, whose runs are still live, are not fired twice.
func TestWatermarkAheadOfTheClockIsPulledBack(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		policy scheduler.Policy
		// want are the occurrences fired in all, as hours after t0 (09:00).
		want []time.Duration
	}{
		// The jumped round fires 09:00 of the next day (skip's latest due), then every hour from
		// 10:00 to 08:00 fires at its time.
		{scheduler.Skip, hours(1, 24)},
		// The jumped round fires 10:00 to 19:00 early (the catch-up cap); at their time they
		// find their runs live, and 20:00 to 08:00 fire.
		{scheduler.RunAll, hours(1, 23)},
	} {
		t.Run(string(c.policy), func(t *testing.T) {
			t.Parallel()
			for _, b := range testenv.Backends() {
				t.Run(b.Name, func(t *testing.T) {
					jc := newJumpClock()
					env := testenv.Start(t, testenv.Options{Store: b.Open(t), Clock: jc})
					logs := &testenv.LogBuffer{}
					reg := prometheus.NewRegistry()
					s, err := scheduler.New(scheduler.Config{Engine: env.Engine, ID: "a", Logger: logs.Logger(), Registerer: reg,
						Schedules: scheduler.Static(define(t, "hourly", "0 * * * *", "UTC", scheduler.CatchUp(c.policy)))})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = s.Stop(context.Background()) })
					tick(t, s) // first seen at 09:00
					jc.at(30*time.Minute, 24*time.Hour)
					tick(t, s) // one round at 09:30 on a clock a day ahead
					if strings.Contains(logs.String(), "jobs.scheduler.clock-behind") {
						t.Fatal("the round on the jumped clock reported a clock behind")
					}

					jc.at(30*time.Minute, 0) // corrected
					tick(t, s)
					if w := info(t, s, "hourly").Watermark; w == nil || !w.Equal(t0.Add(30*time.Minute)) {
						t.Errorf("watermark after the correction %v, want the corrected now %s\n%s", w, t0.Add(30*time.Minute), logs.String())
					}
					if n := strings.Count(logs.String(), "jobs.scheduler.clock-behind"); n != 1 {
						t.Errorf("clock-behind logged %d times, want once:\n%s", n, logs.String())
					}
					for m := 40; m <= 23*60; m += 10 {
						jc.at(time.Duration(m)*time.Minute, 0)
						tick(t, s)
					}
					wantFired(t, env, "hourly", keys("hourly", c.want...))
					if n := strings.Count(logs.String(), "jobs.scheduler.clock-behind"); n != 1 {
						t.Errorf("clock-behind logged %d times, want once", n)
					}
					if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP jobs_scheduler_clock_behind_total Schedule watermarks this engine's scheduler found ahead of its clock, set by a round on a clock that ran ahead, and pulled back to now.
# TYPE jobs_scheduler_clock_behind_total counter
jobs_scheduler_clock_behind_total 1
`), "jobs_scheduler_clock_behind_total"); err != nil {
						t.Error(err)
					}
				})
			}
		})
	}
}

// Nodes' clocks disagree a little: a watermark a previous leader left a few seconds ahead of this
// node's clock is trusted, not pulled back, so the occurrence that leader fired is not walked
// again.
func TestWatermarkSlightlyAheadIsTrusted(t *testing.T) {
	t.Parallel()
	logs := &testenv.LogBuffer{}
	jc := newJumpClock()
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: jc})
	s, err := scheduler.New(scheduler.Config{Engine: env.Engine, ID: "a", Logger: logs.Logger(),
		Schedules: scheduler.Static(define(t, "hourly", "0 * * * *", "UTC"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	tick(t, s)
	jc.at(time.Hour-40*time.Second, 40*time.Second) // a clock 40s ahead fires 10:00 at 09:59:20
	tick(t, s)
	jc.at(time.Hour-30*time.Second, 0) // the round of a node whose clock is right
	tick(t, s)
	if w := info(t, s, "hourly").Watermark; w == nil || !w.Equal(t0.Add(time.Hour)) {
		t.Errorf("watermark %v, want 10:00 kept", w)
	}
	jc.at(time.Hour+time.Second, 0)
	tick(t, s)
	if strings.Contains(logs.String(), "jobs.scheduler.clock-behind") {
		t.Errorf("a watermark 40s ahead was pulled back:\n%s", logs.String())
	}
	if w := info(t, s, "hourly").Watermark; w == nil || !w.Equal(t0.Add(time.Hour)) {
		t.Errorf("watermark %v, want 10:00 kept", w)
	}
	wantFired(t, env, "hourly", keys("hourly", time.Hour))
}
