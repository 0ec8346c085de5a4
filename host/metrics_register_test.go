package host_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/host"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// An application that stops its hosted worker and starts it again in the same process (or
// hosts two) keeps its one Prometheus registry: the next Start works, and counts into the
// series the first registered, where it used to panic on a duplicate registration.
func TestAHostStartsAgainOnTheSameRegistry(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
	eng := env.Engine
	reg, err := jobs.NewRegistry(sendInvoice)
	if err != nil {
		t.Fatal(err)
	}
	preg := prometheus.NewRegistry()
	opts := host.Options{Frontend: eng, Registry: reg, Registerer: preg, Worker: worker.Config{PollWait: 100 * time.Millisecond}}
	ctx := context.Background()
	for i, id := range []string{"inv-1", "inv-2"} {
		h, err := host.Start(ctx, opts)
		if err != nil {
			t.Fatalf("start %d: %v", i+1, err)
		}
		res, err := sendInvoice.Enqueue(ctx, eng, invoice{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		env.Await(res.RunID, store.StateCompleted)
		if err := h.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := preg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != jobs.MetricJobsTotal {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 2 {
				t.Errorf("jobs_total %v = %v after one run per start, want 2", m.GetLabel(), v)
			}
			return
		}
	}
	t.Fatal("no jobs_total in the registry")
}
