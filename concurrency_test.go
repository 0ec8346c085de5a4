package jobs_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

func TestFleetConcurrencyCapHoldsAcrossWorkers(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{Clock: clock.Real{}}, func(t *testing.T, env *testenv.Env) {
		var running, peak atomic.Int32
		j := jobs.MustDefine("import-org", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
			func(c *jobs.Ctx, in int) (int, error) {
				return jobs.Step(c, "import", func(context.Context) (int, error) {
					n := running.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					time.Sleep(40 * time.Millisecond)
					running.Add(-1)
					return in, nil
				})
			}, jobs.Concurrency(2))
		// Two workers with room for five each: only the fleet cap can hold it to two.
		env.Worker(worker.Config{Concurrency: 5}, j)
		env.Worker(worker.Config{Concurrency: 5}, j)
		ids := make([]string, 10)
		for i := range ids {
			ids[i] = enqueue(t, env, j, i)
		}
		for _, id := range ids {
			run := env.Await(id, store.StateCompleted)
			if run.Attempt != 1 {
				t.Fatalf("a claim handed back over the cap spent an attempt: %d", run.Attempt)
			}
		}
		if p := peak.Load(); p > 2 || p < 1 {
			t.Fatalf("peak concurrency %d, cap 2", p)
		}
	})
}
