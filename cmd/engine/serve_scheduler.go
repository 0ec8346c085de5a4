package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/fx"

	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/scheduler"
)

// schedulerOption runs the scheduler in the served app unless disabled. It starts after the
// engine and stops before it: on SIGTERM it stops dispatching, finishes its round and releases
// the lease while the engine can still commit.
func schedulerOption(disabled bool) fx.Option {
	if disabled {
		return fx.Options()
	}
	return fx.Options(
		fx.Supply(scheduler.Config{}),
		// The engine binary holds no job code: its schedules are those the workers' manifests
		// declare.
		fx.Provide(func(e *engine.Engine) scheduler.Provider { return scheduler.FromManifest(e) }),
		scheduler.Module,
	)
}

// metricsRegistry is the one registry of the served process: the API serves it at /metrics, and
// the scheduler registers its metrics in it.
func metricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
