package main

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/fx"

	"github.com/ultimat3/jobs/scheduler"
)

// servedSchedules is where "engine serve" takes its schedules from. The engine binary holds no
// job code, so it declares none of its own: schedules reach it from the workers that declare
// them, and until that path exists this provider returns none. The scheduler still runs, leads,
// and answers the operators' commands.
func servedSchedules(context.Context) ([]scheduler.Schedule, error) { return nil, nil }

// schedulerOption runs the scheduler in the served app unless disabled. It starts after the
// engine and stops before it: on SIGTERM it stops dispatching, finishes its round and releases
// the lease while the engine can still commit.
func schedulerOption(disabled bool) fx.Option {
	if disabled {
		return fx.Options()
	}
	return fx.Options(
		fx.Supply(scheduler.Config{}),
		fx.Supply(scheduler.Provider(servedSchedules)),
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
