package jobs_test

import (
	"context"
	"fmt"
	"github.com/ultimat3/jobs"
	"io"
	"log/slog"
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
// its own answer per step). The budget was 270 until a fresh claim stopped building and decoding
// its RunStarted, the run's log line stopped boxing its values, and the claim's span options,
// clock context, ledger map and lease-token scratch stopped being made per claim: 245 →
// 214–217. Then 230 until the step's and the completion's events stopped boxing their payload
// (history.NewStep, NewCompleted): 213–214 → 202–203.
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
		awaitDone(t, &done, want)
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
	if allocs > 208 || kb > 32 {
		t.Fatalf("a ten-step run allocates %.0f times and %.1f KB; the budget is 208 and 32 KB (it was 436 and 92 KB, then 245, then 230)", allocs, kb)
	}
}

// A no-op job through the in-process engine and worker (memory store): its share of a bulk
// enqueue, the claim, the one completion record and its group commit, the run's log line (to a
// text handler, as the bench's worker logs). This is the backlog drain's unit.
func TestNoopAllocationsPerJob(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items, so allocation counts are not the product's")
	}
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
	var done atomic.Int64
	j := jobs.MustDefine("noop", func(i int) string { return fmt.Sprint(i) }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, in int) (int, error) { done.Add(1); return in, nil })
	env.Worker(worker.Config{Concurrency: 32, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, j)
	next := 0
	drain := func(n int) {
		t.Helper()
		ins := make([]int, n)
		for i := range ins {
			ins[i] = next
			next++
		}
		want := done.Load() + int64(n)
		if _, err := j.EnqueueMany(context.Background(), env.Engine, ins); err != nil {
			t.Fatal(err)
		}
		awaitDone(t, &done, want)
	}
	drain(500)
	const n = 2000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	drain(n)
	runtime.ReadMemStats(&after)
	allocs := float64(after.Mallocs-before.Mallocs) / n
	t.Logf("%.0f allocations per no-op job", allocs)
	if allocs > noopBudget {
		t.Fatalf("a no-op job allocates %.0f times; the budget is %d (it was %d)", allocs, noopBudget, noopBefore)
	}
}

// 90–93 before the cuts of the ten-step test's comment and the hand-written event codec, 69–73 after.
const noopBudget, noopBefore = 78, 91

// awaitDone waits (up to a minute) until done counts want.
func awaitDone(t *testing.T, done *atomic.Int64, want int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for done.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d done after a minute", done.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
}
