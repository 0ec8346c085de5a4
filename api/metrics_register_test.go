package api_test

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// families returns the names of the families reg serves, and how many series each has.
func families(t *testing.T, reg prometheus.Gatherer) map[string]int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]int{}
	for _, mf := range mfs {
		out[mf.GetName()] = len(mf.GetMetric())
	}
	return out
}

// An API server built again for the same engine on the same registry (an fx app built again in
// one process, a server stopped and made again) serves the gauges and counters already registered
// for that engine, which read and count that engine: NewServer used to fail X_INVARIANT on the
// queue collector's duplicate. Each series is served once.
func TestASecondServerForOneEngineSharesItsRegistry(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	testenv.Declare(t, env.Engine, "w", testenv.Untyped("j", "q"))
	if _, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "j", Queue: "q", Key: "k", NoTenant: true}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	for i := range 2 {
		if _, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Registerer: reg, NoUI: true}); err != nil {
			t.Fatalf("server %d for one engine on one registry: %v", i+1, err)
		}
	}
	fs := families(t, reg)
	if fs["queue_depth"] != 1 || fs["queue_stats_up"] != 1 {
		t.Errorf("queue_depth has %d series, queue_stats_up %d; want 1 each (one queue, served once)", fs["queue_depth"], fs["queue_stats_up"])
	}
}

// A registry that serves another engine's metrics refuses a server of this one with X_INVARIANT,
// and is left as it was: adopted, the gauges would report the other engine's queues, and this
// engine's counts would be served nowhere. The same for a registry holding another series under
// one of the server's names.
func TestAServerRefusedItsMetricsLeavesTheRegistryAsItWas(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	other := testenv.Start(t, testenv.Options{Store: memory.New()})
	for _, c := range []struct {
		name string
		prep func(reg *prometheus.Registry)
	}{
		{"another-engines-server", func(reg *prometheus.Registry) {
			if _, err := api.NewServer(api.Config{Engine: other.Engine, Logger: env.Logger, Registerer: reg, NoUI: true}); err != nil {
				t.Fatal(err)
			}
		}},
		{"another-engines-counters", func(reg *prometheus.Registry) { reg.MustRegister(other.Engine.Collectors()...) }},
		{"another-series-of-a-gauges-name", func(reg *prometheus.Registry) {
			reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "backfill_rows", Help: "the application's own"}))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			c.prep(reg)
			before := families(t, reg)
			_, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Registerer: reg, NoUI: true})
			if !jobs.HasCode(err, jobs.CodeInvariant) {
				t.Fatalf("NewServer: %v, want %s", err, jobs.CodeInvariant)
			}
			after := families(t, reg)
			names := func(m map[string]int) []string {
				var out []string
				for n := range m {
					out = append(out, n)
				}
				slices.Sort(out)
				return out
			}
			if !slices.Equal(names(before), names(after)) {
				t.Errorf("the refused server changed the registry: %v, was %v", names(after), names(before))
			}
			// Nothing of the refused server's was left behind: this engine's own server still
			// registers on a fresh registry, and the registry still gathers.
			if _, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Registerer: prometheus.NewRegistry(), NoUI: true}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
