package scheduler

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/ultimat3/jobs/engine"
)

// Module runs a scheduler as part of an fx app, beside engine.Module. It provides the
// *Scheduler built from the app's Config; the app's *engine.Engine, Provider,
// prometheus.Registerer and *slog.Logger fill the Config fields left empty. It starts after the
// engine and stops before it: on SIGTERM it stops dispatching, finishes its round and releases
// the lease while the engine can still commit.
var Module = fx.Module("jobs.scheduler",
	fx.Provide(provide),
	fx.Invoke(func(*Scheduler) {}),
)

// Params are the Module's inputs.
type Params struct {
	fx.In
	Lifecycle  fx.Lifecycle
	Config     Config
	Engine     *engine.Engine        `optional:"true"`
	Provider   Provider              `optional:"true"`
	Registerer prometheus.Registerer `optional:"true"`
	Logger     *slog.Logger          `optional:"true"`
}

func provide(p Params) (*Scheduler, error) {
	cfg := p.Config
	if cfg.Engine == nil {
		cfg.Engine = p.Engine
	}
	if cfg.Schedules == nil {
		cfg.Schedules = p.Provider
	}
	if cfg.Registerer == nil {
		cfg.Registerer = p.Registerer
	}
	if cfg.Logger == nil {
		cfg.Logger = p.Logger
	}
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.Hook{OnStart: s.Start, OnStop: s.Stop})
	return s, nil
}
