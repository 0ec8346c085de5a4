package worker_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// A process may run two workers (two sets of queues, or one started again after a Stop) with
// the one Prometheus registry it serves: the second finds the worker's collectors registered and
// counts into them, where it used to panic on a duplicate registration. The counts are the
// process's, both workers' runs in one series.
func TestTwoWorkersShareOneRegistry(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	preg := prometheus.NewRegistry()
	j := jobs.MustDefine("shared-registry", func(i int) string { return fmt.Sprint(i) }, jobs.NoTenant[int](),
		func(_ *jobs.Ctx, i int) (int, error) { return i, nil })
	env.Worker(worker.Config{Registerer: preg}, j)
	env.Worker(worker.Config{Registerer: preg}, j)
	for i := range 4 {
		res, err := j.Enqueue(context.Background(), env.Engine, i)
		if err != nil {
			t.Fatal(err)
		}
		env.Await(res.RunID, store.StateCompleted)
	}
	if got := testenv.Counter(t, preg, jobs.MetricJobsTotal, map[string]string{"source": "worker", "outcome": "completed"}); got != 4 {
		t.Fatalf(`jobs_total{source="worker",outcome="completed"} = %v after 4 runs on two workers, want 4`, got)
	}
}

// A registry that holds another series under one of the worker's names (another help text, or
// other labels) refuses the worker's: worker.New says so with an error, not a panic, and leaves
// the registry as it found it.
func TestARefusedMetricsRegistrationIsAnError(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	preg := prometheus.NewRegistry()
	preg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "jobs_replayed_total", Help: "Something else."}))
	reg, err := jobs.NewRegistry(testenv.Untyped("refused", "default"))
	if err != nil {
		t.Fatal(err)
	}
	var w *worker.Worker
	func() {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("worker.New panicked: %v", v)
			}
		}()
		w, err = worker.New(worker.Config{Frontend: env.Engine, Registry: reg, Registerer: preg})
	}()
	if w != nil || !jobs.HasCode(err, jobs.CodeInvariant) {
		t.Fatalf("worker.New = %v, %v; want %s", w, err, jobs.CodeInvariant)
	}
	mfs, gerr := preg.Gather()
	if gerr != nil {
		t.Fatal(gerr)
	}
	for _, mf := range mfs {
		if mf.GetName() != "jobs_replayed_total" {
			t.Errorf("the refused worker left %s registered", mf.GetName())
		}
	}
}
