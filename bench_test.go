package jobs_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/replay"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// BenchmarkTenStepMemory measures the engine's own cost per durable step: ten-step runs, 32 in
// flight, on the memory store, so no database time is in the figure.
func BenchmarkTenStepMemory(b *testing.B) {
	env := testenv.Start(b, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
	var done atomic.Int64
	j := tenSteps(&done)
	env.Worker(worker.Config{Concurrency: 32}, j)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := j.Enqueue(context.Background(), env.Engine, i); err != nil {
			b.Fatal(err)
		}
	}
	for done.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(b.N*10)/b.Elapsed().Seconds(), "steps/s")
}

var names = [10]string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9"}

// tenSteps is the benchmarks' workflow: ten no-op durable steps, counting completed runs.
func tenSteps(done *atomic.Int64) *jobs.Job[int, int] {
	return jobs.MustDefine("ten", func(i int) string { return fmt.Sprint(i) }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, in int) (int, error) {
			for i := 0; i < 10; i++ {
				if _, err := jobs.Step(c, names[i], func(context.Context) (int, error) { return i, nil }); err != nil {
					return 0, err
				}
			}
			done.Add(1)
			return in, nil
		})
}

// BenchmarkReplay measures replaying a recorded history: events per second and allocations per
// event, for a run of 10k steps that resumes from the top.
func BenchmarkReplay(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			events := make([]history.Event, 0, n+1)
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			in, _ := jobs.Encode(1)
			events = append(events, history.New(at, history.RunStarted{Job: "long", Input: in, Key: "k", NoTenant: true}))
			out, _ := jobs.Encode(7)
			stepName := make([]string, n)
			for i := range stepName {
				stepName[i] = fmt.Sprintf("s%d", i)
				events = append(events, history.New(at, history.StepCompleted{StepName: stepName[i], Output: out}))
			}
			for i := range events {
				events[i].Seq = int64(i + 1)
			}
			j := jobs.MustDefine("long", func(int) string { return "k" }, jobs.NoTenant[int](),
				func(c *jobs.Ctx, in int) (int, error) {
					for i := 0; i < n; i++ {
						if _, err := jobs.Step(c, stepName[i], func(context.Context) (int, error) { return 0, nil }); err != nil {
							return 0, err
						}
					}
					return 0, nil
				})
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := replay.Check(context.Background(), j, events); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

var _ = engine.Config{}
var _ = store.StateReady
