package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// With AllowUndeclared, an enqueue may name any queue, and a run of it can still be cancelled:
// labelled as named, each made-up queue would be series of jobs_total and
// jobs_run_duration_seconds for the life of the process. Only the queues a worker declares keep
// their own label, whenever they were declared; every other name counts under "undeclared".
func TestEngineSeriesLabelOnlyDeclaredQueues(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()}) // AllowUndeclared
	reg := prometheus.NewRegistry()
	reg.MustRegister(env.Engine.Collectors()...)
	ctx := context.Background()
	testenv.Declare(t, env.Engine, "w1", testenv.Untyped("parcel", "parcels"))
	cancel := func(job, queue, key string) {
		t.Helper()
		res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: job, Queue: queue, Key: key, NoTenant: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.Engine.Cancel(ctx, res.RunID, "test"); err != nil {
			t.Fatal(err)
		}
	}
	cancel("parcel", "parcels", "p")
	const made = 50
	for i := range made {
		cancel("anything", fmt.Sprintf("q-%d-%s", i, strings.Repeat("x", 900)), fmt.Sprint(i))
	}
	// A queue declared after the labels were first worked out is labelled by name at once.
	testenv.Declare(t, env.Engine, "w2", testenv.Untyped("late", "later"))
	cancel("late", "later", "l")

	labels := map[string]bool{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" {
					labels[l.GetValue()] = true
				}
			}
		}
	}
	if len(labels) != 3 || !labels["parcels"] || !labels["later"] || !labels[engine.UndeclaredQueue] {
		var some []string
		for l := range labels {
			if len(some) < 4 {
				some = append(some, l[:min(len(l), 12)])
			}
		}
		t.Fatalf("%d queue labels (%v…); want parcels, later and %s", len(labels), some, engine.UndeclaredQueue)
	}
	for q, want := range map[string]float64{"parcels": 1, "later": 1, engine.UndeclaredQueue: made} {
		if got := testenv.Counter(t, reg, jobs.MetricJobsTotal, map[string]string{"queue": q, "outcome": "cancelled"}); got != want {
			t.Errorf(`jobs_total{queue=%q,outcome="cancelled"} = %v, want %v`, q, got, want)
		}
	}
}
