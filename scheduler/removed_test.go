package scheduler_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
)

// declareSchedules sends worker's manifest declaring ss, as a worker does at start and at every
// resend.
func declareSchedules(t *testing.T, env *testenv.Env, worker string, ss ...scheduler.Schedule) {
	t.Helper()
	reg, err := jobs.NewRegistry(pingJob)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if err := reg.Declare(s.Declaration()); err != nil {
			t.Fatal(err)
		}
	}
	decls, err := reg.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Engine.DeclareManifest(context.Background(), frontend.Manifest{WorkerID: worker, Queues: reg.Queues(), Declarations: decls}); err != nil {
		t.Fatal(err)
	}
}

// A deploy renames a schedule ("hourly" becomes "hourly-v2"): the new build's workers declare
// only the new name and the old build's workers stop. Once no live worker declares "hourly", the
// engine's scheduler stops firing it, though the store keeps the old declaration. When every
// worker is gone (a fleet restart), the scheduler keeps the set the fleet last declared: the
// renamed schedule goes on firing, and the removed one does not come back.
func TestRemovedScheduleStopsFiring(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		hourly := define(t, "hourly", "0 * * * *", "UTC")
		v2 := define(t, "hourly-v2", "0 * * * *", "UTC")
		declareSchedules(t, env, "old-build", hourly)
		s, err := scheduler.New(scheduler.Config{Engine: env.Engine, Schedules: scheduler.FromManifest(env.Engine), ID: "a", Logger: env.Logger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Stop(context.Background()) })
		tick(t, s)
		// The old build's worker is no longer live here (it last resent at 09:00), and no other
		// worker is: the fleet's last set still holds "hourly".
		env.Fake().Set(t0.Add(time.Hour))
		tick(t, s)
		wantFired(t, env, "hourly", keys("hourly", time.Hour))

		env.Fake().Set(t0.Add(90 * time.Minute))
		declareSchedules(t, env, "new-build", v2)
		tick(t, s)
		for h := 2; h <= 5; h++ {
			env.Fake().Set(t0.Add(time.Duration(h) * time.Hour))
			declareSchedules(t, env, "new-build", v2) // the live worker's resend
			tick(t, s)
		}
		all, err := s.Inspect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, in := range all {
			names = append(names, in.Name)
		}
		if !slices.Equal(names, []string{"hourly-v2"}) {
			t.Errorf("the scheduler runs %v, want only hourly-v2", names)
		}

		// Every worker stops; the engine's scheduler goes on with the fleet's last set.
		for h := 6; h <= 7; h++ {
			env.Fake().Set(t0.Add(time.Duration(h) * time.Hour))
			tick(t, s)
		}
		wantFired(t, env, "hourly", keys("hourly", time.Hour))
		wantFired(t, env, "hourly-v2", keys("hourly-v2", hours(2, 7)...))
	})
}
