// Package testenv wires an engine and workers over a store for the project's own tests, with
// functions to wait for a run to reach a state. It builds on the public test kit (jobstest) and adds
// what only the project needs: every backend including Postgres, real clocks, the engine's knobs. It is the one place tests build the system, so every backend's tests
// start it the same way.
package testenv

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/jobstest"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// Options configures an Env.
type Options struct {
	Store store.Store
	// Clock defaults to a Fake clock at 2026-01-05 09:00 UTC.
	Clock clock.Clock
	// Lease defaults to 30s (of the env's clock).
	Lease time.Duration
	// Lookback defaults to the engine's default.
	Lookback time.Duration
	// Logger defaults to discarding unless JOBS_TEST_LOG is set.
	Logger *slog.Logger
	// RequireDeclared refuses enqueues of jobs no worker declared, the engine's default. Tests
	// leave it off so they can enqueue before starting a worker.
	RequireDeclared bool
	// Backfills is the engine's provider of backfill declarations. Optional.
	Backfills engine.BackfillDeclarations
	// Retention is the engine's retention; the zero value is the engine's default.
	Retention engine.RetentionConfig
	// LogRuns turns on the engine's line per finished run (engine.Config.LogRuns).
	LogRuns bool
}

// Env is an engine over a store, plus the workers a test starts.
type Env struct {
	T      testing.TB
	Store  store.Store
	Clock  clock.Clock
	Engine *engine.Engine
	Logger *slog.Logger
}

// Start builds and starts an engine; it is stopped (and its workers with it) at test cleanup.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	if o.Clock == nil {
		o.Clock = clock.NewFake(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	}
	if o.Logger == nil {
		o.Logger = Logger()
	}
	eng, err := engine.New(engine.Config{Store: o.Store, Clock: o.Clock, Lease: o.Lease, Lookback: o.Lookback,
		PollFallback: 50 * time.Millisecond, StickyWindow: 500 * time.Millisecond, Logger: o.Logger,
		AllowUndeclared: !o.RequireDeclared, Backfills: o.Backfills, Retention: o.Retention, LogRuns: o.LogRuns})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = eng.Stop(ctx)
	})
	return &Env{T: t, Store: o.Store, Clock: o.Clock, Engine: eng, Logger: o.Logger}
}

// Logger returns a logger that writes to stderr when JOBS_TEST_LOG is set, else nowhere.
func Logger() *slog.Logger {
	if os.Getenv("JOBS_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Worker starts a worker hosting defs; it is stopped at cleanup unless the test stops it first.
func (e *Env) Worker(cfg worker.Config, defs ...jobs.Definition) *worker.Worker {
	e.T.Helper()
	reg, err := jobs.NewRegistry(defs...)
	if err != nil {
		e.T.Fatal(err)
	}
	if cfg.Frontend == nil {
		cfg.Frontend = e.Engine
	}
	cfg.Registry = reg
	if cfg.Clock == nil {
		cfg.Clock = e.Clock
	}
	if cfg.Logger == nil {
		cfg.Logger = e.Logger
	}
	if cfg.PollWait == 0 {
		cfg.PollWait = time.Second
	}
	w, err := worker.New(cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	return w
}

// Declare sends the manifest of a worker that polls fe (the engine, or a client of it) by hand:
// it hosts defs, on their queues. Tests that claim runs themselves, without a worker.Worker,
// declare first, as a worker does at Start.
func Declare(t testing.TB, fe frontend.Frontend, workerID string, defs ...jobs.Definition) {
	t.Helper()
	reg, err := jobs.NewRegistry(defs...)
	if err != nil {
		t.Fatal(err)
	}
	decls, err := reg.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fe.DeclareManifest(context.Background(), frontend.Manifest{WorkerID: workerID, Queues: reg.Queues(), Declarations: decls}); err != nil {
		t.Fatal(err)
	}
}

// Untyped is a job named name on queue, for tests that enqueue and claim by name.
func Untyped(name, queue string) jobs.Definition {
	return jobs.MustDefine(name, func(s any) string { return "" }, jobs.NoTenant[any](),
		func(*jobs.Ctx, any) (any, error) { return nil, nil }, jobs.Queue(queue))
}

// UntypedTenanted is Untyped for a job declared with a tenant, for tests that enqueue its runs
// under tenants and claim them by hand: the engine refuses a tenant for a job declared NoTenant.
// Its tenant function names no tenant, so a worker running it refuses such runs.
func UntypedTenanted(name, queue string) jobs.Definition {
	return jobs.MustDefine(name, func(s any) string { return "" }, jobs.TenantFrom(func(any) string { return "" }),
		func(*jobs.Ctx, any) (any, error) { return nil, nil }, jobs.Queue(queue))
}

// Fake returns the env's clock as a Fake (the test must have left the default).
func (e *Env) Fake() *clock.Fake { return e.Clock.(*clock.Fake) }

// Advance moves a fake clock and returns once every timer due by then has fired (the public test
// kit's AdvanceAndFire).
func (e *Env) Advance(d time.Duration) {
	e.T.Helper()
	jobstest.AdvanceAndFire(e.T, e.Engine, e.Store, e.Fake(), d)
}

// Await waits (in wall-clock time, up to 20s) until the run is in one of states, and returns it.
func (e *Env) Await(runID string, states ...store.State) store.Run {
	e.T.Helper()
	return jobstest.Await(e.T, e.Engine, runID, states...)
}

// AwaitParked waits (in wall-clock time, up to 10s) until w keeps n runs parked. The store says
// suspended as the suspending record commits, and the worker parks the body only when the
// answer is back: a wake-up claimed in between replays, so a test of the parked path waits.
func AwaitParked(t testing.TB, w *worker.Worker, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); w.Parked() != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d runs parked, want %d", w.Parked(), n)
		}
	}
}

// History returns a run's whole history.
func (e *Env) History(runID string) []history.Event {
	e.T.Helper()
	evs, err := e.Engine.History(context.Background(), runID, 0)
	if err != nil {
		e.T.Fatal(err)
	}
	return evs
}

// Kinds lists the kinds of a history, for assertions that read like the log.
func Kinds(events []history.Event) []string { return jobstest.Kinds(events) }

// LongRun enqueues req (a run on a queue of its own) and records n completed steps of output on
// it straight through the store, as a worker's records would, in batches of 250: for tests of
// what reads a long history. mid puts other events at their seqs (the first step is seq 2). The
// run is left running, claimed by worker "w". It returns the run's id.
func (e *Env) LongRun(req jobs.EnqueueRequest, n int, output []byte, mid map[int]history.Event) string {
	e.T.Helper()
	ctx := context.Background()
	res, err := e.Engine.Enqueue(ctx, req)
	if err != nil {
		e.T.Fatal(err)
	}
	now := e.Clock.Now()
	runs, err := e.Store.RunClaim(ctx, store.ClaimParams{WorkerID: "w", Queues: []string{req.Queue}, Limit: 1,
		Now: now, LeaseUntil: now.Add(time.Hour), StickyBefore: now})
	if err != nil || len(runs) != 1 || runs[0].ID != res.RunID {
		e.T.Fatalf("claim the run %s: %d runs, %v", res.RunID, len(runs), err)
	}
	for seq := 2; seq <= n+1; {
		var evs []history.Event
		for ; seq <= n+1 && len(evs) < 250; seq++ {
			if ev, ok := mid[seq]; ok {
				evs = append(evs, ev)
				continue
			}
			evs = append(evs, history.New(now, history.StepCompleted{StepName: fmt.Sprintf("s%05d", seq), Output: output}))
		}
		applied, err := e.Store.RunApply(ctx, []store.Mutation{{RunID: runs[0].ID, Fence: runs[0].Fence, Now: now, Events: evs}})
		if err == nil {
			err = applied[0].Err
		}
		if err != nil {
			e.T.Fatalf("record steps on run %s: %v", res.RunID, err)
		}
	}
	return res.RunID
}
