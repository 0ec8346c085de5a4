// Package jobstest runs an application's jobs in a test: an in-process engine on the memory
// store (or a SQLite file in the test's temp dir) with a fake clock, a worker hosting the jobs
// under test, and functions to drive and inspect runs: run to completion, advance time, publish
// events, and assertions over a run's history (steps recorded, state, result).
//
//	env := jobstest.New(t, jobstest.Options{}, Onboarding)
//	run := jobstest.Enqueue(env, Onboarding, Signup{OrgID: "acme"}) // or Onboarding.Enqueue(ctx, env.Engine, in)
//	env.AwaitSuspended(run)                                // asleep
//	env.Advance(72 * time.Hour)                            // three days in microseconds
//	env.Publish("plan.chosen", PlanChosen{OrgID: "acme", Plan: "pro"})
//	env.AssertCompleted(run)
//	env.AssertSteps(run, "step:provision", "sleep:grace-period", "wait:plan", "step:welcome")
//
// Everything is stopped at the test's cleanup. These functions fail the test (t.Fatal) rather than return
// errors, so a test reads as the story it checks.
package jobstest

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/store/sqlite"
	"github.com/ultimat3/jobs/worker"
)

// Epoch is where a test's fake clock starts unless Options.Start says otherwise.
var Epoch = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// Options configures an Env. The zero value is a memory store, a fake clock at Epoch and one
// worker hosting the jobs passed to New.
type Options struct {
	// Store is the engine's store. Default: a fresh memory store (SQLite: true for a file).
	Store store.Store
	// SQLite opens a fresh SQLite file in the test's temp dir instead of the memory store.
	SQLite bool
	// Start is the fake clock's starting time. Default Epoch.
	Start time.Time
	// Lookback is the engine's event lookback window. Default the engine's (5 min).
	Lookback time.Duration
	// Lease is the engine's claim lease. Default 30 days of the fake clock: the kit's worker
	// lives in the test's process and cannot die without it, and with the engine's 30 s a test
	// that advances the clock past it while a body runs (to reach a jobs.Timeout, say) would see
	// the lease lapse before the worker's renewal lands, and the run handed out again. A test of
	// lease expiry sets it.
	Lease time.Duration
	// Worker tunes the worker (queues, concurrency, …); Frontend, Registry and Clock are set.
	// Its StickyRuns defaults to -1: the body is replayed at every wake-up, so a test catches
	// code that does not replay. Set it above zero to resume parked bodies, as a long-lived
	// worker mostly does.
	Worker worker.Config
	// Logger defaults to discarding everything.
	Logger *slog.Logger
}

// Env is an engine, a fake clock and a worker for one test.
type Env struct {
	T      testing.TB
	Engine *engine.Engine
	Store  store.Store
	Clock  *clock.Fake
	Worker *worker.Worker
	Logger *slog.Logger

	// stopTimeout bounds each stop at the test's cleanup (a worker's drain, the engine's).
	stopTimeout time.Duration
}

// New starts an engine (any job may be enqueued, declared or not) and, when defs are given, a
// worker hosting them.
func New(t testing.TB, o Options, defs ...jobs.Definition) *Env {
	t.Helper()
	if o.Start.IsZero() {
		o.Start = Epoch
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Store == nil {
		if o.SQLite {
			s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "jobs.db")})
			if err != nil {
				t.Fatalf("jobstest: open SQLite: %v", err)
			}
			t.Cleanup(func() { _ = s.Close() })
			o.Store = s
		} else {
			o.Store = memory.New()
		}
	}
	fake := clock.NewFake(o.Start)
	if o.Lease == 0 {
		o.Lease = 30 * 24 * time.Hour
	}
	eng, err := engine.New(engine.Config{Store: o.Store, Clock: fake, Lookback: o.Lookback, Logger: o.Logger, Lease: o.Lease,
		PollFallback: 50 * time.Millisecond, StickyWindow: 500 * time.Millisecond, AllowUndeclared: true})
	if err != nil {
		t.Fatalf("jobstest: engine: %v", err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatalf("jobstest: start the engine: %v", err)
	}
	e := &Env{T: t, Engine: eng, Store: o.Store, Clock: fake, Logger: o.Logger, stopTimeout: 10 * time.Second}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), e.stopTimeout)
		defer cancel()
		if err := eng.Stop(ctx); err != nil {
			t.Errorf("jobstest: the engine did not stop within %s: %v", e.stopTimeout, err)
		}
	})
	if len(defs) > 0 {
		e.Worker = e.StartWorker(o.Worker, defs...)
	}
	return e
}

// StartWorker starts (another) worker hosting defs on the env's engine and clock; it is stopped
// at cleanup.
func (e *Env) StartWorker(cfg worker.Config, defs ...jobs.Definition) *worker.Worker {
	e.T.Helper()
	reg, err := jobs.NewRegistry(defs...)
	if err != nil {
		e.T.Fatalf("jobstest: registry: %v", err)
	}
	cfg.Registry = reg
	if cfg.Frontend == nil {
		cfg.Frontend = e.Engine
	}
	if cfg.Clock == nil {
		cfg.Clock = e.Clock
	}
	if cfg.Logger == nil {
		cfg.Logger = e.Logger
	}
	if cfg.PollWait == 0 {
		cfg.PollWait = time.Second
	}
	if cfg.StickyRuns == 0 {
		// Replay the body at every wake-up, as a worker that restarted (or any other worker)
		// would, instead of resuming it parked in memory: code that does not replay (a step name
		// from rand or time.Now, a durable call from a goroutine) then fails the test with
		// X_REPLAY_DIVERGED rather than passing it and failing in production.
		cfg.StickyRuns = -1
	}
	// The bodies run under a context the cleanup ends. A worker's Stop lets the runs in flight
	// finish, as a deploy's drain should; but once the test is over nothing will finish a step
	// that waits (on its context, a channel, an hour): the cleanup would stall for the whole
	// stop timeout and leave the body running past the test, on a store being closed. Ending
	// the context first lets a step that honours it return, and the worker drain at once.
	base := cfg.BaseContext
	if base == nil {
		base = context.Background
	}
	testOver, endBodies := context.WithCancel(context.Background())
	cfg.BaseContext = func() context.Context {
		ctx, cancel := context.WithCancel(base())
		context.AfterFunc(testOver, cancel)
		return ctx
	}
	w, err := worker.New(cfg)
	if err != nil {
		endBodies()
		e.T.Fatalf("jobstest: worker: %v", err)
	}
	if err := w.Start(context.Background()); err != nil {
		endBodies()
		e.T.Fatalf("jobstest: start the worker: %v", err)
	}
	e.T.Cleanup(func() {
		endBodies()
		ctx, cancel := context.WithTimeout(context.Background(), e.stopTimeout)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			// Said, not swallowed: a body that ignores its context is still running after the
			// test, and would be after a deploy's drain too.
			e.T.Errorf("jobstest: the worker did not stop within %s (a body still runs and ignores its context's end): %v",
				e.stopTimeout, err)
		}
	})
	return w
}

// Enqueuer is a job that can be enqueued with its input (a *jobs.Job[In, Out]).
type Enqueuer[In any] interface {
	Enqueue(ctx context.Context, c jobs.Enqueuer, in In) (jobs.EnqueueResult, error)
}

// Enqueue enqueues a run of job and returns its id.
func Enqueue[In any](e *Env, job Enqueuer[In], in In) string {
	e.T.Helper()
	res, err := job.Enqueue(context.Background(), e.Engine, in)
	if err != nil {
		e.T.Fatalf("jobstest: enqueue: %v", err)
	}
	return res.RunID
}

// Publish publishes an event, as an app or `engine events publish` would.
func (e *Env) Publish(name string, payload any) {
	e.T.Helper()
	if _, err := e.Engine.Publish(context.Background(), name, payload); err != nil {
		e.T.Fatalf("jobstest: publish %s: %v", name, err)
	}
}

// Advance moves the fake clock by d and returns once every timer due by then has fired (sleeps
// ended, waits timed out, retries made ready).
func (e *Env) Advance(d time.Duration) {
	e.T.Helper()
	AdvanceAndFire(e.T, e.Engine, e.Store, e.Clock, d)
}

// AdvanceAndFire moves fake by d and returns once every timer of st due by then has fired. The
// clock alone is not enough: the engine's timer service may be firing the same timers
// concurrently, and a test must not look at its runs before those wake-ups landed.
func AdvanceAndFire(t testing.TB, eng *engine.Engine, st store.Store, fake *clock.Fake, d time.Duration) {
	t.Helper()
	fake.Advance(d)
	now := fake.Now()
	deadline := time.Now().Add(10 * time.Second)
	for {
		eng.Tick(context.Background())
		next, ok, err := st.TimerNext(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ok || next.After(now) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a timer due at %s was still unfired at %s", next, now)
		}
		time.Sleep(time.Millisecond)
	}
}

// Await waits (in real time, up to 20s) until the run is in one of states, and returns it. A run
// that finished (completed, failed or cancelled) in another state fails the test at once.
//
// A run handed back for flow control (its job's fleet concurrency cap, a keyed limit, or the
// worker's own LimitConfig: a per-tenant cap backs off from 250 ms to 5 s) is delayed on the fake
// clock, which nothing else moves: while the run waits so, Await moves the clock on to the next
// armed timer, never past the run's own, so a limited job's runs get their turn as they would in
// real time, however long the hand-back. A run delayed by its enqueue or a retry is left alone
// (that is the test's clock to move). On a timeout the message says why the run waits, when the
// engine knows.
func (e *Env) Await(runID string, states ...store.State) store.Run {
	e.T.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	var run store.Run
	var inspected delay // the delay whose view said why the run waits: settled once per delay
	handedBack := false
	for time.Now().Before(deadline) {
		var err error
		if run, err = e.Engine.GetRun(ctx, runID); err != nil {
			e.T.Fatalf("get run %s: %v", runID, err)
		}
		if slices.Contains(states, run.State) {
			return run
		}
		if engine.Terminal(run.State) {
			// A finished run changes no more on its own: say so now rather than after 20s.
			e.T.Fatalf("run %s is %s, want one of %v (error: %s %s)", runID, run.State, states, run.ErrorCode, run.Error)
			return run
		}
		if run.State == store.StateDelayed {
			if d := delayOf(run); d != inspected {
				v, err := e.Engine.InspectRun(ctx, runID)
				handedBack = err == nil && v.DueAt == nil && v.Waiting != ""
				// The engine notes why a claim was handed back once the hand-back has committed:
				// a look in between reads the run delayed with nothing said. Only a view that says
				// why (a note, or a due time) settles the delay; else look again.
				if handedBack || (err == nil && v.DueAt != nil) {
					inspected = d
				}
			}
			if handedBack && e.advanceToHandBack(ctx, runID, inspected) {
				continue
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	why := ""
	if v, err := e.Engine.InspectRun(ctx, runID); err == nil && v.Waiting != "" {
		why = "; it waits: " + v.Waiting
	}
	e.T.Fatalf("run %s: state %s after 20s, want one of %v (error: %s %s)%s", runID, run.State, states, run.ErrorCode, run.Error, why)
	return run
}

// delay names one stay of a run in delayed: a run enters it again only through a claim, which
// raises its fence (UpdatedAt alone may repeat on a clock that does not move).
type delay struct {
	fence   int64
	updated int64 // UnixNano
}

func delayOf(r store.Run) delay { return delay{fence: r.Fence, updated: r.UpdatedAt.UnixNano()} }

// advanceToHandBack moves the fake clock to the store's next timer while the run is still in the
// delay d (a hand-back, which armed a timer for when it may be claimed again), and reports
// whether it moved or fired anything. The next timer is due no later than the run's own, so the
// clock never passes it: other timers due before it fire first, as they would in real time.
func (e *Env) advanceToHandBack(ctx context.Context, runID string, d delay) bool {
	next, ok, err := e.Store.TimerNext(ctx)
	if err != nil {
		e.T.Fatal(err)
	}
	if !ok {
		return false
	}
	// Read the run again after the timer: had it left the delay in between (its timer fired, it
	// was claimed and went to sleep), the next timer could be a sleep of its own, far off.
	run, err := e.Engine.GetRun(ctx, runID)
	if err != nil {
		e.T.Fatalf("get run %s: %v", runID, err)
	}
	if run.State != store.StateDelayed || delayOf(run) != d {
		return false
	}
	e.Advance(max(next.Sub(e.Clock.Now()), 0))
	return true
}

// Await waits (in real time, up to 20s) until the run is in one of states, and returns it. A run
// that finished (completed, failed or cancelled) in another state fails the test at once.
func Await(t testing.TB, eng *engine.Engine, runID string, states ...store.State) store.Run {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var run store.Run
	for time.Now().Before(deadline) {
		var err error
		run, err = eng.GetRun(context.Background(), runID)
		if err != nil {
			t.Fatalf("get run %s: %v", runID, err)
		}
		if slices.Contains(states, run.State) {
			return run
		}
		if engine.Terminal(run.State) {
			// A finished run changes no more on its own: say so now rather than after 20s.
			t.Fatalf("run %s is %s, want one of %v (error: %s %s)", runID, run.State, states, run.ErrorCode, run.Error)
			return run
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("run %s: state %s after 20s, want one of %v (error: %s %s)", runID, run.State, states, run.ErrorCode, run.Error)
	return run
}

// AwaitSuspended waits until the run is suspended (asleep or waiting for an event).
func (e *Env) AwaitSuspended(runID string) store.Run {
	e.T.Helper()
	return e.Await(runID, store.StateSuspended)
}

// RunToCompletion drives the run to an end: whenever it is suspended or delayed it advances the
// fake clock to its next timer (a sleep's end, a wait's timeout, a retry), until the run is
// completed, failed, cancelled or blocked, and returns it. A run waiting for an event times out
// this way: publish first to take the other branch.
//
// A run may wait on another run (a child it called) that has not armed its timer yet: while any
// run of the env is ready or running, RunToCompletion waits for it to get on (in real time, up to
// 20s). Only once nothing is ready or running and no timer is armed does it fail the test:
// nothing will wake the run.
func (e *Env) RunToCompletion(runID string) store.Run {
	e.T.Helper()
	for range 1000 {
		run := e.Await(runID, store.StateSuspended, store.StateDelayed, store.StateCompleted, store.StateFailed,
			store.StateCancelled, store.StateBlocked)
		if run.State.Finished() || run.State == store.StateBlocked {
			return run
		}
		next, ok, err := e.Store.TimerNext(context.Background())
		if err != nil {
			e.T.Fatal(err)
		}
		if !ok {
			// Nothing to jump to yet: wait for another run's progress to arm a timer or to wake
			// this one, then look again.
			e.awaitTimerOrQuiet(run)
			continue
		}
		e.Advance(max(next.Sub(e.Clock.Now()), 0))
	}
	e.T.Fatalf("run %s did not finish after 1000 wake-ups", runID)
	return store.Run{}
}

// quietFor is how long the env must stay quiet (no run ready or running, no timer) before
// RunToCompletion concludes nothing will wake a run: a run's end and its parent's wake-up are
// two commits, and the moment between them is quiet too.
const quietFor = 200 * time.Millisecond

// awaitTimerOrQuiet returns once a timer is armed or the run has left the suspension or delay it
// was in (was, a row RunToCompletion read with no timer armed). It fails the test once the env
// is quiet (no run ready or running, no timer) for quietFor while the run still waits, or when
// runs stay ready or running for 20s without arming a timer or waking it.
func (e *Env) awaitTimerOrQuiet(was store.Run) {
	e.T.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	var quietSince time.Time
	for {
		if _, ok, err := e.Store.TimerNext(ctx); err != nil {
			e.T.Fatal(err)
		} else if ok {
			return
		}
		run, err := e.Engine.GetRun(ctx, was.ID)
		if err != nil {
			e.T.Fatalf("get run %s: %v", was.ID, err)
		}
		if run.State != was.State || run.LastSeq != was.LastSeq || run.Fence != was.Fence {
			return
		}
		busy, err := e.busy(ctx)
		if err != nil {
			e.T.Fatal(err)
		}
		now := time.Now()
		switch {
		case busy > 0:
			quietSince = time.Time{}
		case quietSince.IsZero():
			quietSince = now
		case now.Sub(quietSince) >= quietFor:
			e.T.Fatalf("run %s is %s, no timer is armed and no run is ready or running: nothing will wake it", was.ID, was.State)
		}
		if now.After(deadline) {
			e.T.Fatalf("run %s is %s and no timer is armed: %d runs stayed ready or running for 20s without arming one or waking it%s",
				was.ID, was.State, busy, e.stalled(ctx))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// busy counts the env's runs that are ready or running: runs whose progress may yet arm a timer
// or wake another run.
func (e *Env) busy(ctx context.Context) (int, error) {
	stats, err := e.Store.QueueStats(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, q := range stats {
		n += q.Counts[store.StateReady] + q.Counts[store.StateRunning]
	}
	return n, nil
}

// stalled says why a few of the ready runs wait, when the engine knows (no worker hosts their
// job, say).
func (e *Env) stalled(ctx context.Context) string {
	runs, err := e.Store.RunList(ctx, store.ListParams{State: store.StateReady, Limit: 3})
	if err != nil {
		return ""
	}
	out := ""
	for _, r := range runs {
		if v, err := e.Engine.InspectRun(ctx, r.ID); err == nil && v.Waiting != "" {
			out += "; ready run " + r.ID + " (" + r.Job + ") waits: " + v.Waiting
		}
	}
	return out
}

// History returns a run's whole history.
func (e *Env) History(runID string) []history.Event {
	e.T.Helper()
	evs, err := e.Engine.History(context.Background(), runID, 0)
	if err != nil {
		e.T.Fatalf("jobstest: history of %s: %v", runID, err)
	}
	return evs
}

// Kinds lists a history as "Kind" or "Kind:name" strings, for assertions that read like the log.
func Kinds(events []history.Event) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = string(ev.Kind)
		if ev.Name != "" {
			out[i] += ":" + ev.Name
		}
	}
	return out
}

// Calls lists the durable calls a run recorded, in order, as "step:name", "step-failed:name" (a
// failed step the body went on past), "sleep:name", "wait:name", "publish:name" or
// "enqueue:name": what the body did, without the wake-ups.
func (e *Env) Calls(runID string) []string {
	e.T.Helper()
	var out []string
	for _, ev := range e.History(runID) {
		switch ev.Kind {
		case history.KindStepCompleted:
			out = append(out, "step:"+ev.Name)
		case history.KindStepFailed:
			out = append(out, "step-failed:"+ev.Name)
		case history.KindTimerStarted:
			out = append(out, "sleep:"+ev.Name)
		case history.KindEventWaitStarted:
			out = append(out, "wait:"+ev.Name)
		case history.KindEventPublished:
			out = append(out, "publish:"+ev.Name)
		case history.KindChildEnqueued:
			out = append(out, "enqueue:"+ev.Name)
		}
	}
	return out
}

// AssertSteps fails the test unless the run's durable calls (Calls) are exactly want.
func (e *Env) AssertSteps(runID string, want ...string) {
	e.T.Helper()
	if got := e.Calls(runID); !slices.Equal(got, want) {
		e.T.Errorf("run %s recorded %q, want %q", runID, got, want)
	}
}

// AssertState fails the test unless the run is in state now.
func (e *Env) AssertState(runID string, want store.State) store.Run {
	e.T.Helper()
	run, err := e.Engine.GetRun(context.Background(), runID)
	if err != nil {
		e.T.Fatalf("jobstest: get run %s: %v", runID, err)
	}
	if run.State != want {
		e.T.Errorf("run %s is %s, want %s (error: %s %s)", runID, run.State, want, run.ErrorCode, run.Error)
	}
	return run
}

// AssertCompleted waits for the run to finish and fails the test unless it completed.
func (e *Env) AssertCompleted(runID string) store.Run {
	e.T.Helper()
	run := e.Await(runID, store.StateCompleted, store.StateFailed, store.StateCancelled, store.StateBlocked)
	if run.State != store.StateCompleted {
		e.T.Fatalf("run %s is %s, want completed (error: %s %s)", runID, run.State, run.ErrorCode, run.Error)
	}
	return run
}

// Resulter is a job whose result can be decoded (a *jobs.Job[In, Out]).
type Resulter[Out any] interface {
	Result(result []byte) (Out, error)
}

// Result waits for the run to complete and returns its result decoded as job's output.
func Result[Out any](e *Env, job Resulter[Out], runID string) Out {
	e.T.Helper()
	run := e.AssertCompleted(runID)
	out, err := job.Result(run.Result)
	if err != nil {
		e.T.Fatalf("jobstest: decode the result of %s: %v", runID, err)
	}
	return out
}
