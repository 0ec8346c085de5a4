package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// Stop drains: it returns only once the run in flight has finished and its result is recorded,
// and it does not cut the run short (its context stays live, its last step lands). A deploy
// that stops workers (SIGTERM runs Stop) loses no work, and leaves no claim to lapse and rerun.
func TestStopDrainsTheRunInFlight(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	entered, release := make(chan struct{}), make(chan struct{})
	cut := make(chan error, 1)
	j := jobs.MustDefine("drained", func(int) string { return "k" }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, in int) (int, error) {
			if _, err := jobs.Step(c, "first", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return 0, err
			}
			close(entered)
			<-release
			cut <- c.Err()
			return jobs.Step(c, "last", func(context.Context) (int, error) { return in, nil })
		})
	w := env.Worker(worker.Config{}, j)
	res, err := j.Enqueue(context.Background(), env.Engine, 7)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the run never started")
	}

	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		stopped <- w.Stop(ctx)
	}()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a run was in flight", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Stop did not return after the run finished")
	}
	if err := <-cut; err != nil {
		t.Fatalf("the drain cancelled the run in flight: %v", err)
	}
	// Read at once, not awaited: the result was recorded before Stop returned.
	run, err := env.Engine.GetRun(context.Background(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.State != store.StateCompleted || run.Attempt != 1 {
		t.Fatalf("after Stop the run is %s at attempt %d; want completed on attempt 1, history %v",
			run.State, run.Attempt, testenv.Kinds(env.History(res.RunID)))
	}
}
