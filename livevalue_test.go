package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// A step's result is the same value live as on every replay: the recorded one. The body saw the
// value its function returned live and the record's decoded copy on a replay, which differ for a
// time in another zone, a number inside an interface (int live, int8 replayed) and fields msgpack
// does not carry: the same run computed different results depending on whether its worker
// replayed it, or named a later step differently and blocked at its first replay.
func TestAStepGivesTheSameValueLiveAndReplayed(t *testing.T) {
	t.Parallel()
	zone := time.FixedZone("UTC+9", 9*3600)
	body := func(c *jobs.Ctx, in int) (string, error) {
		m, err := jobs.Step(c, "fetch", func(context.Context) (map[string]any, error) {
			return map[string]any{"count": 5}, nil
		})
		if err != nil {
			return "", err
		}
		at, err := jobs.Go(c, "when", func(context.Context) (time.Time, error) {
			return time.Date(2026, 1, 6, 0, 30, 0, 0, zone), nil
		}).Await(c)
		if err != nil {
			return "", err
		}
		if err := jobs.Sleep(c, "nap", time.Hour); err != nil {
			return "", err
		}
		return fmt.Sprintf("%T %s", m["count"], at.Format("2006-01-02 15:04 MST")), nil
	}
	results := map[int]string{}
	for _, sticky := range []int{100, -1} { // parked across the sleep, and replayed after it
		j := jobs.MustDefine("live-or-replayed", func(int) string { return "k" }, jobs.NoTenant[int](), body)
		env := testenv.Start(t, testenv.Options{Store: memory.New()})
		env.Worker(worker.Config{StickyRuns: sticky}, j)
		res, err := j.Enqueue(t.Context(), env.Engine, 1)
		if err != nil {
			t.Fatal(err)
		}
		env.Await(res.RunID, store.StateSuspended)
		env.Advance(time.Hour)
		run := env.Await(res.RunID, store.StateCompleted, store.StateBlocked, store.StateFailed)
		out, err := j.Result(run.Result)
		if run.State != store.StateCompleted || err != nil {
			t.Fatalf("sticky %d: %s %s %s (%v)", sticky, run.State, run.ErrorCode, run.Error, err)
		}
		results[sticky] = out
	}
	if results[100] != results[-1] {
		t.Fatalf("live %q, replayed %q; want the same", results[100], results[-1])
	}
}
