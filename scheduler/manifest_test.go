package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
)

// An engine serving remote workers holds no job code: the schedules its scheduler runs are the
// ones the workers' manifests declare. A worker declares one, the engine's scheduler fires it.
func TestSchedulesComeFromTheManifest(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		hourly := define(t, "hourly", "0 * * * *", "UTC")
		reg, err := jobs.NewRegistry(pingJob)
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Declare(hourly.Declaration()); err != nil {
			t.Fatalf("Declare: %v", err)
		}
		decls, err := reg.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		provider := scheduler.FromManifest(env.Engine)
		if got, err := provider(ctx); err != nil || len(got) != 0 {
			t.Fatalf("before any manifest: %v, %v; want none", got, err)
		}
		if _, err := env.Engine.DeclareManifest(ctx, frontend.Manifest{WorkerID: "w1", Queues: reg.Queues(), Declarations: decls}); err != nil {
			t.Fatal(err)
		}
		got, err := provider(ctx)
		if err != nil || len(got) != 1 || got[0].Checksum() != hourly.Checksum() {
			t.Fatalf("from the manifest: %+v, %v; want the declared schedule", got, err)
		}

		s, err := scheduler.New(scheduler.Config{Engine: env.Engine, Schedules: provider, ID: "a", Logger: env.Logger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Stop(context.Background()) })
		tick(t, s)
		env.Fake().Set(t0.Add(time.Hour))
		tick(t, s)
		wantFired(t, env, "hourly", keys("hourly", time.Hour))
	})
}
