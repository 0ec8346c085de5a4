package engine

import (
	"log/slog"

	"go.uber.org/fx"

	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/store"
)

// Module runs an engine as part of an fx app. It provides the *Engine built from the app's Config
// (a store.Store or *slog.Logger in the app fills the Config fields left empty) and the engine as
// the app's frontend.Frontend, so a worker in the same app runs in-process. The engine starts
// with the app and stops with it, after the services that depend on it (the API) have stopped
// and before the store they depend on is closed.
//
// New remains the way to build an engine without fx.
var Module = fx.Module("jobs.engine",
	fx.Provide(provide),
	fx.Provide(func(e *Engine) frontend.Frontend { return e }),
)

// Params are the Module's inputs.
type Params struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    Config
	Store     store.Store  `optional:"true"`
	Logger    *slog.Logger `optional:"true"`
}

func provide(p Params) (*Engine, error) {
	cfg := p.Config
	if cfg.Store == nil {
		cfg.Store = p.Store
	}
	if cfg.Logger == nil {
		cfg.Logger = p.Logger
	}
	e, err := New(cfg)
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.Hook{OnStart: e.Start, OnStop: e.Stop})
	return e, nil
}
