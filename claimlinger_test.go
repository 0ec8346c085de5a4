package jobs_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// claimCounter counts the polls that claimed runs and the runs they claimed.
type claimCounter struct {
	frontend.Frontend
	claims, runs atomic.Int64
}

func (c *claimCounter) Poll(ctx context.Context, req frontend.PollRequest) ([]frontend.Task, error) {
	tasks, err := c.Frontend.Poll(ctx, req)
	if len(tasks) > 0 {
		c.claims.Add(1)
		c.runs.Add(int64(len(tasks)))
	}
	return tasks, err
}

// Under load a poller waits briefly for more slots to free before it claims, so it makes fewer,
// larger claims; with the linger switched off it claims each slot as it frees.
func TestClaimLingerMakesLargerClaims(t *testing.T) {
	perClaim := func(t *testing.T, linger time.Duration) float64 {
		env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
		var done atomic.Int64
		// Bodies of staggered lengths free their slots one at a time.
		j := jobs.MustDefine("linger", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
			func(cx *jobs.Ctx, in int) (int, error) {
				time.Sleep(time.Duration(1+in%7) * time.Millisecond)
				done.Add(1)
				return in, nil
			})
		const n = 240
		for i := range n {
			enqueue(t, env, j, i)
		}
		probe := &claimCounter{Frontend: env.Engine}
		env.Worker(worker.Config{Frontend: probe, Concurrency: 16, ClaimLinger: linger, ClaimBatch: 8}, j)
		deadline := time.Now().Add(30 * time.Second)
		for done.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d runs done", done.Load(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return float64(probe.runs.Load()) / float64(probe.claims.Load())
	}
	off := perClaim(t, -1)
	on := perClaim(t, 200*time.Millisecond)
	t.Logf("runs per claim: %.1f without linger, %.1f with", off, on)
	if on < 6 {
		t.Errorf("%.1f runs per claim with a linger for 8 free slots; want at least 6", on)
	}
}

// A lingering poller never delays the run of an idle worker: a lone ready run is claimed at once.
// With runs in flight, a run waits at most the linger for its free slot.
func TestClaimLingerNeverDelaysAnIdleWorker(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{Clock: clock.Real{}}, func(t *testing.T, env *testenv.Env) {
		release := make(chan struct{})
		var once sync.Once
		j := jobs.MustDefine("linger-idle", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
			func(cx *jobs.Ctx, in int) (int, error) {
				if in > 0 {
					<-release
				}
				return in, nil
			})
		t.Cleanup(func() { once.Do(func() { close(release) }) })
		const linger = time.Second
		env.Worker(worker.Config{Concurrency: 4, ClaimLinger: linger, ClaimBatch: 4}, j)
		time.Sleep(50 * time.Millisecond) // the poller is waiting, idle
		start := time.Now()
		env.Await(enqueue(t, env, j, 0), store.StateCompleted)
		if el := time.Since(start); el > linger/2 {
			t.Errorf("a lone ready run on an idle worker took %s", el)
		}
		// Three runs hold three of the four slots; the fourth slot's run waits at most the
		// linger, not until a held run ends.
		for i := 1; i <= 3; i++ {
			enqueue(t, env, j, i)
		}
		time.Sleep(100 * time.Millisecond)
		start = time.Now()
		env.Await(enqueue(t, env, j, 0), store.StateCompleted)
		if el := time.Since(start); el > 2*linger {
			t.Errorf("a ready run beside busy slots took %s", el)
		}
		once.Do(func() { close(release) })
	})
}
