package engine_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// A delayed run says when it becomes ready: its enqueue's delay, or its failed attempt's retry.
func TestADelayedRunSaysWhenItIsDue(t *testing.T) {
	t.Parallel()
	flaky := jobs.MustDefine("flaky-once", func(i int) string { return "k" }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, i int) (int, error) {
			if c.Run().Attempt == 1 {
				return 0, errors.New("not yet")
			}
			return i, nil
		}, jobs.Retry(jobs.RetryPolicy{Attempts: 3, Delay: time.Hour}))
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		ctx := t.Context()
		req, _ := flaky.Request(1)
		req.Delay = 90 * time.Minute
		res, err := env.Engine.Enqueue(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		v, err := env.Engine.InspectRun(ctx, res.RunID)
		if want := env.Clock.Now().Add(90 * time.Minute); err != nil || v.DueAt == nil || !v.DueAt.Equal(want) {
			t.Fatalf("delayed by its enqueue: due %v (%v), want %v", v.DueAt, err, want)
		}
		env.Worker(worker.Config{}, flaky)
		env.Advance(90 * time.Minute)
		run := env.Await(res.RunID, store.StateDelayed)
		v, err = env.Engine.InspectRun(ctx, run.ID)
		if err != nil || v.DueAt == nil || len(v.Attempts) != 1 || v.Attempts[0].RetryAt == nil || !v.DueAt.Equal(*v.Attempts[0].RetryAt) {
			t.Fatalf("delayed by a retry: due %v, attempts %+v (%v); want the retry's time", v.DueAt, v.Attempts, err)
		}
		env.Advance(time.Hour)
		env.Await(res.RunID, store.StateCompleted)
		if v, _ = env.Engine.InspectRun(ctx, res.RunID); v.DueAt != nil {
			t.Fatalf("a completed run says it is due at %v", v.DueAt)
		}
	})
}

// backfill.Declared is what engine.Config.Backfills takes, as the README says an embedding app
// passes it.
var _ engine.BackfillDeclarations = backfill.Declared
