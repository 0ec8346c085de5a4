package jobs_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/internal/race"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// A ten-step run through the in-process engine and worker (memory store, so no driver in the
// figure) pins the hot path's allocations: the claim, each step's record through the group
// commit, the completion and the run's log line. Garbage is the collector's CPU, which was the
// largest single item of a no-op job's profile on Postgres. It counts allocations, never time,
// over every goroutine of the process (the engine's and the worker's loops included), after a
// warm-up that fills the pools and grows the long-lived goroutines' stacks.
//
// Before the budget was set a run allocated 436 times and 92 KB (a MaxBatch-sized slice per
// group commit, a record and its answer channel per step, an encoder per value and per event,
// a formatted lease key, an HMAC and a derived logger per claim, a command slice and a decode of
// its own answer per step).
func TestTenStepAllocationsPerRun(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items, so allocation counts are not the product's")
	}
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
	var done atomic.Int64
	j := tenSteps(&done)
	env.Worker(worker.Config{Concurrency: 8}, j)
	next := 0
	runs := func(n int) {
		t.Helper()
		want := done.Load() + int64(n)
		for range n {
			if _, err := j.Enqueue(context.Background(), env.Engine, next); err != nil {
				t.Fatal(err)
			}
			next++
		}
		deadline := time.Now().Add(time.Minute)
		for done.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d runs done after a minute", done.Load(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	runs(300)
	const n = 1000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	runs(n)
	runtime.ReadMemStats(&after)
	allocs := float64(after.Mallocs-before.Mallocs) / n
	kb := float64(after.TotalAlloc-before.TotalAlloc) / n / 1024
	t.Logf("%.0f allocations and %.1f KB per ten-step run", allocs, kb)
	if allocs > 270 || kb > 32 {
		t.Fatalf("a ten-step run allocates %.0f times and %.1f KB; the budget is 270 and 32 KB (it was 436 and 92 KB)", allocs, kb)
	}
}
