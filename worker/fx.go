package worker

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
)

// Module runs a worker as part of an fx app. It provides the *Worker built from the app's Config,
// whose empty Frontend, Registry, Registerer and Logger are filled from the app (an in-process
// engine.Module or a remote api.Client provides the frontend.Frontend). The worker starts
// polling when the app starts; when it stops (SIGTERM), it stops claiming, finishes the runs in
// flight within the app's stop timeout and unwinds its parked runs, before the engine or client
// it depends on is stopped.
//
// New remains the way to build a worker without fx.
var Module = fx.Module("jobs.worker",
	fx.Provide(provide),
	fx.Invoke(func(*Worker) {}),
)

// Params are the Module's inputs.
type Params struct {
	fx.In
	Lifecycle  fx.Lifecycle
	Config     Config
	Frontend   frontend.Frontend     `optional:"true"`
	Registry   *jobs.Registry        `optional:"true"`
	Registerer prometheus.Registerer `optional:"true"`
	Logger     *slog.Logger          `optional:"true"`
	// TracerProvider, when the app provides one, receives the worker's spans (trace.go).
	TracerProvider trace.TracerProvider `optional:"true"`
}

func provide(p Params) (*Worker, error) {
	cfg := p.Config
	if cfg.Frontend == nil {
		cfg.Frontend = p.Frontend
	}
	if cfg.Registry == nil {
		cfg.Registry = p.Registry
	}
	if cfg.Registerer == nil {
		cfg.Registerer = p.Registerer
	}
	if cfg.Logger == nil {
		cfg.Logger = p.Logger
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = p.TracerProvider
	}
	w, err := New(cfg)
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.Hook{OnStart: w.Start, OnStop: w.Stop})
	return w, nil
}
