package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs/bench/internal/limits"
	"github.com/ultimat3/jobs/bench/internal/measure"
	"github.com/ultimat3/jobs/bench/internal/record"
	"github.com/ultimat3/jobs/bench/systems"
)

// childSpec is what the parent asks one child process to measure. Each run gets a process of
// its own so that nothing a system leaves behind (goroutines, pools, a large heap, a global
// registry) can slow or help the next one, and so that a panicking peer fails one run only.
type childSpec struct {
	Kind        string        `json:"kind"` // "system" or "sqlite"
	System      string        `json:"system,omitempty"`
	Scenario    string        `json:"scenario,omitempty"`
	N           int           `json:"n,omitempty"`
	Concurrency int           `json:"concurrency,omitempty"`
	Run         int           `json:"run"`
	DBURL       string        `json:"db_url,omitempty"`
	DB          string        `json:"db,omitempty"`
	AdminURL    string        `json:"admin_url,omitempty"`
	Dir         string        `json:"dir"`
	PoolSize    int           `json:"pool_size,omitempty"`
	Sync        string        `json:"sync,omitempty"`
	Duration    time.Duration `json:"duration,omitempty"`
	Timeout     time.Duration `json:"timeout"`
	Postmaster  int           `json:"postmaster,omitempty"`
	// Timer-lag scenario: span of the due times, and the time the runs get to fall asleep.
	TimerWindow time.Duration `json:"timer_window,omitempty"`
	TimerLead   time.Duration `json:"timer_lead,omitempty"`
}

// childMain runs one measurement and writes its sample as JSON to outPath. Failures of the
// measured system are recorded in the sample (Err) rather than returned, so that the parent can
// report them; an error return means the harness itself could not do its job.
func childMain(specPath, outPath string) error {
	raw, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	var spec childSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), spec.Timeout)
	defer cancel()

	var s record.Sample
	switch spec.Kind {
	case "sqlite":
		s, err = limits.SQLiteLoop{Dir: spec.Dir, Sync: spec.Sync, Duration: spec.Duration, Postmaster: spec.Postmaster}.Run(ctx)
		if err != nil {
			s.Err = err.Error()
		}
	case "system":
		s = runSystem(ctx, spec)
	default:
		return fmt.Errorf("unknown child kind %q", spec.Kind)
	}
	s.Run = spec.Run
	out, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(outPath, out, 0o644)
}

// runSystem is one run of one scenario on one system: Setup, baseline, the timed call, Close,
// and the final statistics once every connection of the system is gone.
func runSystem(ctx context.Context, spec childSpec) (s record.Sample) {
	s = record.Sample{Scenario: spec.Scenario, System: spec.System, N: spec.N, Concurrency: spec.Concurrency}
	factory, ok := systems.Lookup(spec.System)
	if !ok {
		s.Err = "unknown system " + spec.System
		return s
	}
	sys := factory()
	s.Label = sys.Name()

	admin, err := pgx.Connect(ctx, spec.AdminURL)
	if err != nil {
		s.Err = "admin connection: " + err.Error()
		return s
	}
	defer admin.Close(context.Background())

	closed := false
	closeSys := func() {
		if !closed {
			closed = true
			err := sys.Close()
			switch {
			case err == nil || s.Err != "":
			case s.Units > 0:
				// The work was done and verified; a slow shutdown does not void the figure,
				// but it is shown beside it.
				s.Note = joinNote(s.Note, "close: "+err.Error())
			default:
				s.Err = "close: " + err.Error()
			}
		}
	}
	defer closeSys()

	env := systems.Env{DatabaseURL: spec.DBURL, Dir: spec.Dir, PoolSize: spec.PoolSize}
	if err := sys.Setup(ctx, env); err != nil {
		s.Err = "setup: " + err.Error()
		return s
	}
	// The engine-only scenarios do their untimed part (a long history written, timers armed)
	// before the statistics' baseline and the CPU window.
	timed, err := prepare(ctx, sys, spec)
	if reason, ok := systems.IsUnsupported(err); ok {
		s.Skip = reason
		return s
	}
	if err != nil {
		s.Err = "prepare: " + err.Error()
		return s
	}
	before, err := measure.ReadDBStats(ctx, admin, spec.DB)
	if err != nil {
		s.Err = err.Error()
		return s
	}

	// The parent (the orchestrating bench process) is ours too, not a foreign load.
	win, err := measure.StartWindow(spec.Postmaster, os.Getppid())
	if err != nil {
		s.Err = err.Error()
		return s
	}
	var res systems.Result
	switch spec.Scenario {
	case systems.ScenarioNoop:
		res, err = sys.NoopJobs(ctx, spec.N, spec.Concurrency)
	case systems.ScenarioTenStep:
		res, err = sys.TenStep(ctx, spec.N, spec.Concurrency)
	case systems.ScenarioReplay, systems.ScenarioResume, systems.ScenarioTimers,
		systems.ScenarioBackfill, systems.ScenarioBackfillOverlap, systems.ScenarioBackfillLoop, systems.ScenarioBackfillResume,
		systems.ScenarioBulk, systems.ScenarioTxPlain, systems.ScenarioTxEnqueue, systems.ScenarioTxStage,
		systems.ScenarioRelay,
		systems.ScenarioFairness, systems.ScenarioFairnessOldest, systems.ScenarioFairnessEmpty,
		systems.ScenarioDrain32, systems.ScenarioDrain100:
		res, err = timed(ctx)
	default:
		err = fmt.Errorf("unknown scenario %q", spec.Scenario)
	}
	u := win.Stop()

	s.Backend, s.Note = res.Backend, res.Note
	if reason, ok := systems.IsUnsupported(err); ok {
		s.Skip = reason
		return s
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (run timeout %s)", err, spec.Timeout)
		}
		s.Err = err.Error()
		return s
	}
	if res.Units != spec.N {
		s.Err = fmt.Sprintf("system confirmed %d of %d units", res.Units, spec.N)
		return s
	}
	s.Units, s.Steps = res.Units, res.Steps
	s.Seconds = u.Wall.Seconds()
	s.Rate = float64(res.Units) / u.Wall.Seconds()
	s.MachineCPU, s.LoadCPU, s.PostgresCPU, s.ForeignCPU = u.Machine, u.Self, u.Postgres, u.Foreign
	if res.Events > 0 {
		s.Events, s.AllocBytes, s.Allocs = res.Events, res.AllocBytes, res.Allocs
		s.HistoryRead = res.HistoryRead.Seconds()
		s.Rate = float64(res.Events) / u.Wall.Seconds()
	}
	if s.Lag = record.Summarize(res.Lags); s.Lag != nil {
		s.Lag.SpacingMs = float64(spec.TimerWindow) / float64(spec.N) / float64(time.Millisecond)
		s.Lag.WindowS, s.Lag.LeadS = spec.TimerWindow.Seconds(), spec.TimerLead.Seconds()
		s.Lag.ArmS, s.Lag.SlackMs = res.Arm.Seconds(), float64(res.Slack)/float64(time.Millisecond)
		if spec.Scenario == systems.ScenarioTimers {
			s.Lag.Tenths = record.ByTenth(res.Lags)
		}
	}

	// Statistics are exact only once the system's backends have exited and flushed them.
	closeSys()
	if err := measure.WaitIdle(ctx, admin, spec.DB, 15*time.Second); err != nil {
		s.Note = joinNote(s.Note, "stats may be incomplete: "+err.Error())
	}
	after, err := measure.ReadDBStats(ctx, admin, spec.DB)
	if err != nil {
		s.Err = err.Error()
		return s
	}
	d := after.Sub(before)
	// A system with an embedded store leaves no trace in Postgres; show that as "not
	// applicable" rather than as a suspiciously perfect zero.
	if (d.XactCommit != 0 || d.XactRollback != 0 || d.RowsWritten() != 0) && (timed == nil || counted(spec.Scenario)) {
		s.PG = &d
	}
	// The engine-only scenarios are left without counters: their preparation writes through the
	// pool the timed part then uses, and a Postgres backend flushes its statistics lazily (up to
	// 10 s after it goes idle), so the window would be charged with the preparation's work (a
	// 100k-event history, the arming of every timer).
	return s
}

// prepare does the untimed part of an engine-only scenario and returns its timed part; it returns
// nil for the scenarios every system runs in one call.
func prepare(ctx context.Context, sys systems.System, spec childSpec) (systems.Measure, error) {
	switch spec.Scenario {
	case systems.ScenarioReplay, systems.ScenarioResume:
		r, ok := sys.(systems.Replayer)
		if !ok {
			return nil, systems.Unsupported("replay is measured for our engine only")
		}
		if spec.Scenario == systems.ScenarioReplay {
			return r.ReplayCheck(ctx, spec.N)
		}
		return r.Resume(ctx, spec.N)
	case systems.ScenarioBackfill, systems.ScenarioBackfillOverlap, systems.ScenarioBackfillLoop, systems.ScenarioBackfillResume:
		b, ok := sys.(systems.Backfiller)
		if !ok {
			return nil, systems.Unsupported("backfills are measured for our engine only")
		}
		switch spec.Scenario {
		case systems.ScenarioBackfill:
			return b.BackfillPass(ctx, spec.N)
		case systems.ScenarioBackfillOverlap:
			return b.BackfillOverlap(ctx, spec.N)
		case systems.ScenarioBackfillLoop:
			return b.BackfillLoop(ctx, spec.N)
		}
		return b.BackfillResume(ctx, spec.N)
	case systems.ScenarioBulk, systems.ScenarioTxPlain, systems.ScenarioTxEnqueue, systems.ScenarioTxStage,
		systems.ScenarioRelay:
		return prepareSection9(ctx, sys, spec)
	case systems.ScenarioFairness, systems.ScenarioFairnessOldest, systems.ScenarioFairnessEmpty:
		f, ok := sys.(systems.FairnessMeasurer)
		if !ok {
			return nil, systems.Unsupported("fair claiming is measured for our engine only")
		}
		return f.Fairness(ctx, systems.FairnessSpec{Backlog: spec.N - systems.FairnessNewcomers, Concurrency: spec.Concurrency,
			OldestFirst: spec.Scenario == systems.ScenarioFairnessOldest})
	case systems.ScenarioDrain32, systems.ScenarioDrain100:
		return prepareDrain(ctx, sys, spec)
	case systems.ScenarioTimers:
		t, ok := sys.(systems.TimerLagger)
		if !ok {
			return nil, systems.Unsupported("timer lag is measured for our engine only")
		}
		return t.TimerLag(ctx, systems.TimerSpec{Timers: spec.N, Window: spec.TimerWindow, Lead: spec.TimerLead,
			Concurrency: spec.Concurrency})
	}
	return nil, nil
}
