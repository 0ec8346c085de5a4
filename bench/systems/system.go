// Package systems holds the contract between the benchmark harness and the systems it measures
// (our engine and its peers), plus a registry so a system can be added in its own file without
// touching the others.
//
// To add a system, write one file in this package:
//
//	func init() { Register("jobs", func() System { return &jobsSystem{} }) }
//
// The harness creates a fresh System value, calls Setup, runs exactly one scenario method and then
// Close, all in a child process of its own, once per run. Everything a system leaves behind (its
// goroutines, its pools, its heap) therefore dies with that process and cannot bias the next run.
package systems

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Scenario names, as used on the command line and in results.
const (
	ScenarioNoop    = "noop"    // n no-op jobs, enqueue → completed, bounded concurrency
	ScenarioTenStep = "tenstep" // n workflow runs of 10 durable steps each, bounded concurrency

	// Scenarios of our engine alone (peers implement neither Replayer nor TimerLagger).
	ScenarioReplay = "replay" // replay.Check over an in-memory history of n step events
	ScenarioResume = "resume" // a run with n recorded step events resumes on a fresh worker
	ScenarioTimers = "timers" // n sleeping runs whose wake-ups fall due within one window
)

// Env is what the harness gives a system for one run.
type Env struct {
	// DatabaseURL names a freshly created, empty Postgres database that belongs to this run
	// alone. The harness reads pg_stat_database for it, so every write the system makes to
	// Postgres must go here.
	DatabaseURL string
	// Dir is a fresh, empty scratch directory for this run, for systems with an embedded store
	// (SQLite files and the like). It is on the same filesystem the report names.
	Dir string
	// PoolSize is the connection-pool size every Postgres-backed system is given, so that no
	// system is held back (or helped) by a different pool default.
	PoolSize int
}

// Result is what a scenario method reports. The harness times the call itself and measures CPU
// and database counters around it; the system only says how much work it verified as done.
type Result struct {
	// Units is the number of jobs (noop) or workflow runs (tenstep) that the system confirmed
	// as completed. It must be checked, not assumed: count completion events, read results,
	// or query the system's tables.
	Units int
	// Steps is the number of durable steps those units executed (tenstep: Units*10; noop: 0).
	Steps int
	// Backend labels the storage the system used when a system can use more than one, e.g.
	// "postgres" or "sqlite (monoprocess)". Shown in the tables.
	Backend string
	// Note is a short remark shown beside the figure (e.g. a setting that differs from the
	// system's defaults).
	Note string

	// Events is the number of history events replayed in the timed call (replay, resume); the
	// harness then reports events/s instead of units/s.
	Events int
	// AllocBytes and Allocs are the heap bytes and objects the process allocated during the
	// timed call (runtime.MemStats deltas), for the per-event figures of replay and resume.
	AllocBytes, Allocs uint64
	// HistoryRead is the part of the timed call spent reading the run's history from the store
	// (resume).
	HistoryRead time.Duration
	// Lags holds fired − due for every timer: in due order for timers (so the report can show
	// where in the window the lag grew), in no particular order for fairness.
	Lags []time.Duration
	// Arm is how long the runs took, before the timed call, from the first enqueue until every
	// one had reached its sleep (timers); Slack is the least time left between a run reaching
	// its sleep and its due time (negative: a run armed after it was due).
	Arm, Slack time.Duration
}

// Measure is the timed part of a scenario that needs an untimed preparation: the harness opens
// its window, calls it, and closes the window when it returns.
type Measure func(ctx context.Context) (Result, error)

// Replayer is implemented by systems that measure replaying long histories (our engine). Each
// method does its scenario's untimed preparation and returns the part to time.
type Replayer interface {
	// ReplayCheck builds, in memory, the history of a run that called `events` steps, and
	// returns a Measure that replays it with replay.Check (several passes; Result.Events counts
	// every event replayed, Units the events of one history).
	ReplayCheck(ctx context.Context, events int) (Measure, error)
	// Resume writes, through the store API, a run whose history holds `events` completed steps
	// and leaves it ready; the Measure starts a worker and returns when the run has completed,
	// all of it replayed (Units and Events: the events replayed).
	Resume(ctx context.Context, events int) (Measure, error)
}

// TimerSpec shapes the timer-lag scenario.
type TimerSpec struct {
	// Timers is the number of runs, each sleeping once.
	Timers int
	// Window is the span over which their due times are spread evenly: run i is due at
	// T0 + i·Window/Timers.
	Window time.Duration
	// Lead is T0 − the first enqueue: the time every run has to reach its sleep before the
	// first wake-up is due.
	Lead time.Duration
	// Concurrency is the worker's concurrency.
	Concurrency int
}

// TimerLagger is implemented by systems that measure how late durable timers fire (our engine).
// TimerLag enqueues the runs and waits until every one sleeps (untimed); the Measure returns when
// all have woken and completed, with Result.Lags.
type TimerLagger interface {
	TimerLag(ctx context.Context, spec TimerSpec) (Measure, error)
}

// System is one measured system. Implementations need not be safe for concurrent use by the
// harness: it calls Setup, one scenario method and Close, in that order, from one goroutine.
type System interface {
	// Name is the label shown in the tables, e.g. "river (tuned)".
	Name() string
	// Module is the Go module path whose version the report prints for this system ("" if none).
	Module() string
	// Setup prepares the system for one run against env: schema migrations, clients, workers.
	// Whatever Setup costs is outside the timed window, but connections it leaves open may
	// carry not-yet-flushed statistics into it, so run schema migrations on a connection that
	// is closed before Setup returns.
	Setup(ctx context.Context, env Env) error
	// NoopJobs enqueues n jobs that do nothing and returns once all n are completed, keeping
	// `concurrency` of them in flight (workers, or concurrent callers for systems whose API is
	// call-and-wait).
	NoopJobs(ctx context.Context, n, concurrency int) (Result, error)
	// TenStep runs `runs` workflows of ten durable steps each (each step a no-op) with
	// `concurrency` workflows in flight, and returns once all have completed.
	TenStep(ctx context.Context, runs, concurrency int) (Result, error)
	// Close stops the system and closes every connection it opened; the harness waits for the
	// database's backends to exit before it reads the final statistics.
	Close() error
}

// Skipper is optionally implemented by systems that do not support some scenarios, so that the
// harness can show "n/a (reason)" without paying for Setup. Return "" for supported scenarios.
type Skipper interface {
	Skip(scenario string) string
}

// unsupportedError marks a scenario a system cannot run; its text is the reason shown as n/a.
type unsupportedError struct{ reason string }

func (e unsupportedError) Error() string { return e.reason }

// Unsupported returns an error that the harness shows as "n/a" with reason rather than as a
// failure. Scenario methods may return it when support is only known at run time.
func Unsupported(reason string) error { return unsupportedError{reason: reason} }

// IsUnsupported reports whether err came from Unsupported, and its reason.
func IsUnsupported(err error) (string, bool) {
	var u unsupportedError
	if errors.As(err, &u) {
		return u.reason, true
	}
	return "", false
}

// Factory builds a new, unconfigured System value. It must not connect to anything: the harness
// calls it in the parent process only to read Name, Module and Skip.
type Factory func() System

type entry struct {
	key     string
	factory Factory
}

var (
	mu       sync.Mutex
	registry = map[string]Factory{}
	keyRE    = regexp.MustCompile(`^[a-z][a-z0-9_]{0,30}$`)
)

// Register adds a system under key, a short identifier used on the command line and in database
// names (lower case, digits and underscores). It panics on a bad or duplicate key, since that is
// a programming error found at start-up.
func Register(key string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if !keyRE.MatchString(key) {
		panic(fmt.Sprintf("systems: bad key %q (want %s)", key, keyRE))
	}
	if _, dup := registry[key]; dup {
		panic(fmt.Sprintf("systems: %q registered twice", key))
	}
	registry[key] = f
}

// Keys returns the registered keys in report order: our own engine ("jobs", "jobs_*") first, then
// the peers alphabetically, so tables read the same from run to run.
func Keys() []string {
	mu.Lock()
	defer mu.Unlock()
	keys := make([]string, 0, len(registry))
	for k := range registry {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		oi, oj := IsOurs(keys[i]), IsOurs(keys[j])
		if oi != oj {
			return oi
		}
		return keys[i] < keys[j]
	})
	return keys
}

// Lookup returns the factory registered under key.
func Lookup(key string) (Factory, bool) {
	mu.Lock()
	defer mu.Unlock()
	f, ok := registry[key]
	return f, ok
}

// IsOurs reports whether key names our own engine rather than a peer.
func IsOurs(key string) bool {
	return key == "jobs" || len(key) > 5 && key[:5] == "jobs_"
}

// ClosedLoop calls fn(ctx, i) for i in [0, total) from `concurrency` goroutines, each taking the
// next index as soon as its previous call returns, so that exactly `concurrency` calls are in
// flight until the work runs out. It returns how many calls succeeded and the first error; after
// an error the remaining indices are abandoned.
//
// It is the shape of "N callers each run a workflow and wait for its result", shared by all
// systems so that they are loaded the same way.
func ClosedLoop(ctx context.Context, total, concurrency int, fn func(ctx context.Context, i int) error) (int, error) {
	if concurrency < 1 {
		concurrency = 1
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var next, done atomic.Int64
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= total || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(fmt.Errorf("call %d: %w", i, err))
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return int(done.Load()), context.Cause(ctx)
}

// awaitCount returns once count() reaches n (checked every millisecond: the clock of a
// measurement stops there), or ctx's error with how far it got.
func awaitCount(ctx context.Context, n int64, count func() int64) error {
	for count() < n {
		if ctx.Err() != nil {
			return fmt.Errorf("%d of %d runs completed: %w", count(), n, ctx.Err())
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}
