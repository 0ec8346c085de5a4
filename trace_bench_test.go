package jobs_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// BenchmarkTenStepMemoryTraced is BenchmarkTenStepMemory with every run enqueued under a
// sampled span and the worker recording its spans (an SDK provider with no exporter): the cost
// of tracing when it is on. With it off, BenchmarkTenStepMemory is the figure.
func BenchmarkTenStepMemoryTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	env := testenv.Start(b, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
	var done atomic.Int64
	j := tenSteps(&done)
	env.Worker(worker.Config{Concurrency: 32, TracerProvider: tp}, j)
	ctx, span := tp.Tracer("bench").Start(context.Background(), "enqueue")
	defer span.End()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := j.Enqueue(ctx, env.Engine, i); err != nil {
			b.Fatal(err)
		}
	}
	for done.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(b.N*10)/b.Elapsed().Seconds(), "steps/s")
}
