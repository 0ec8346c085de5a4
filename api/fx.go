package api

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/scheduler"
)

// Module serves the API as part of an fx app: it provides the *Server built from the app's
// Config and *engine.Engine, listens when the app starts and shuts down gracefully when it stops.
// Because the server depends on the engine, fx starts it after the engine and stops it before:
// on SIGTERM the API stops accepting first, then the engine finishes what is in flight.
var Module = fx.Module("jobs.api",
	fx.Provide(provideServer),
	fx.Invoke(func(*Server) {}),
)

// Params are the Module's inputs. Config is required; the others fill Config's empty fields.
type Params struct {
	fx.In
	Lifecycle  fx.Lifecycle
	Config     Config
	Engine     *engine.Engine        `optional:"true"`
	Scheduler  *scheduler.Scheduler  `optional:"true"`
	Registerer prometheus.Registerer `optional:"true"`
	Gatherer   prometheus.Gatherer   `optional:"true"`
	Logger     *slog.Logger          `optional:"true"`
}

func provideServer(p Params) (*Server, error) {
	cfg := p.Config
	if cfg.Engine == nil {
		cfg.Engine = p.Engine
	}
	if cfg.Scheduler == nil {
		cfg.Scheduler = p.Scheduler
	}
	if cfg.Registerer == nil {
		cfg.Registerer = p.Registerer
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = p.Gatherer
	}
	if cfg.Logger == nil {
		cfg.Logger = p.Logger
	}
	s, err := NewServer(cfg)
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: s.Start,
		OnStop:  func(ctx context.Context) error { return s.Stop(ctx) },
	})
	return s, nil
}
