// Command bench measures our engine's peers (and, once registered, our engine) against the
// PostgreSQL named by TEST_DATABASE_URL and writes BENCHMARKS.md.
//
// It is meant to be run through bench/run.sh under scripts/with-postgres.sh (that is what
// `make bench` does). Settings come from flags, each defaulting to an environment variable so
// that run.sh and `make` can pass them through; BENCH_QUICK=1 shrinks every count for a smoke
// test.
//
// `bench render results.json OUT.md` renders a saved run again without measuring.
//
// The parent process orchestrates: it creates a fresh database per system per run, checkpoints,
// then starts a child process of itself (`bench child SPEC OUT`) that runs exactly one scenario
// and writes one JSON sample. pgbench runs are driven by the parent directly.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs/bench/internal/limits"
	"github.com/ultimat3/jobs/bench/internal/measure"
	"github.com/ultimat3/jobs/bench/internal/record"
	"github.com/ultimat3/jobs/bench/internal/report"
	"github.com/ultimat3/jobs/bench/systems"
)

// config is the whole run's shape. Full-size defaults are chosen to keep run.sh under about 25
// minutes on two cores; see estimate().
type config struct {
	Quick          bool
	Runs           int
	NoopJobs       int
	TenStepRuns    int
	Concurrency    int
	PoolSize       int
	PgbenchSeconds int
	PgbenchClients []int
	SQLiteSeconds  int
	SQLiteSyncs    []string
	Systems        []string // registry keys to run; empty = all
	RunTimeout     time.Duration
	Out            string // BENCHMARKS.md
	JSON           string // raw samples
	AdminURL       string
	Pgbench        string
	Scratch        string
	JobsRev        string        // our checkout's revision, for the report
	Retries        int           // re-runs of a measurement disturbed by other processes
	QuietWait      time.Duration // longest wait for an idle machine before a measurement
	// DisturbanceBudget caps the total time spent waiting for quiet and re-running.
	DisturbanceBudget time.Duration

	// Scenarios 5 and 6, our engine only.
	ReplayEvents []int         // history lengths replayed with replay.Check
	ResumeEvents int           // recorded events of the run that resumes on a fresh worker
	Timers       int           // sleeping runs of the timer-lag scenario
	FairBacklog  int           // tenant A's backlog in the fairness scenario
	TimerWindow  time.Duration // span of their due times
	TimerLead    time.Duration // first enqueue → first due time; 0 = derived from Timers
	// Section 8, our engine only.
	BackfillRows  int // rows of the table both sweeps update
	BackfillPages int // completed pages of the pass that resumes
	// Section 9.
	BulkJobs, TxCount, RelayRows int
	// Section 12: the backlog a drain starts from.
	DrainJobs int
	// Scenarios limits the run to some sections (pgbench, sqlite, noop, tenstep, replay,
	// resume, timers); empty = all.
	Scenarios []string
}

// allScenarios are the names BENCH_SCENARIOS accepts, in the order the harness runs them.
var allScenarios = []string{record.ScenarioPgbench, record.ScenarioSQLite, systems.ScenarioNoop, systems.ScenarioTenStep,
	systems.ScenarioReplay, systems.ScenarioResume, systems.ScenarioTimers,
	systems.ScenarioBackfill, systems.ScenarioBackfillOverlap, systems.ScenarioBackfillLoop, systems.ScenarioBackfillResume,
	systems.ScenarioBulk, systems.ScenarioTxPlain, systems.ScenarioTxEnqueue, systems.ScenarioTxStage,
	systems.ScenarioRelay, systems.ScenarioFairness, scenarioDrain,
	"scale"} // section 11: run.sh runs `bench scale` after the harness and appends its report

func (c config) runs(scenario string) bool {
	return len(c.Scenarios) == 0 || slices.Contains(c.Scenarios, scenario)
}

// timerLead is the time the timer runs get to fall asleep before the first is due: three seconds
// plus 1 ms a run. Arming 10k runs took 2.8 s on Postgres and 2.3 s on SQLite on one machine and
// 7.5 s and over 8 s on a slower one, where 0.5 ms a run failed most runs: the lead is untimed,
// so it is sized for the slow machine.
func (c config) timerLead() time.Duration {
	if c.TimerLead > 0 {
		return c.TimerLead
	}
	return 3*time.Second + time.Duration(c.Timers)*time.Millisecond
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("bench: ")
	if len(os.Args) == 4 && os.Args[1] == "child" {
		if err := childMain(os.Args[2], os.Args[3]); err != nil {
			log.Fatalf("child: %v", err)
		}
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == systems.RemoteWorkerArg {
		if err := systems.RemoteWorkerMain(os.Args[2:]); err != nil {
			log.Fatalf("remote worker: %v", err)
		}
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == "multi" {
		if err := systems.MultiMain(os.Args[2:]); err != nil {
			log.Fatalf("multi: %v", err)
		}
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == "scale" {
		if err := scaleMain(os.Args[2:]); err != nil {
			log.Fatalf("scale: %v", err)
		}
		return
	}
	if len(os.Args) == 4 && os.Args[1] == "render" {
		if err := renderMain(os.Args[2], os.Args[3]); err != nil {
			log.Fatalf("render: %v", err)
		}
		return
	}

	cfg, err := parseConfig()
	if err != nil {
		log.Fatal(err)
	}
	if err := run(cfg); err != nil {
		log.Fatal(err)
	}
}

func parseConfig() (config, error) {
	quick := envBool("BENCH_QUICK")
	// Quick mode is a smoke test of the whole pipeline, not a measurement.
	pick := func(full, small int) int {
		if quick {
			return small
		}
		return full
	}
	pickStr := func(full, small string) string {
		if quick {
			return small
		}
		return full
	}
	var c config
	var clients, syncs, only string
	var timeout string
	flag.BoolVar(&c.Quick, "quick", quick, "small counts and one run (BENCH_QUICK=1)")
	flag.IntVar(&c.Runs, "runs", envInt("BENCH_RUNS", pick(3, 1)), "runs per scenario; tables show medians (BENCH_RUNS)")
	flag.IntVar(&c.NoopJobs, "noop-jobs", envInt("BENCH_NOOP_JOBS", pick(20000, 500)), "jobs in the no-op scenario (BENCH_NOOP_JOBS)")
	flag.IntVar(&c.TenStepRuns, "tenstep-runs", envInt("BENCH_TENSTEP_RUNS", pick(2000, 100)), "workflow runs in the 10-step scenario (BENCH_TENSTEP_RUNS)")
	flag.IntVar(&c.Concurrency, "concurrency", envInt("BENCH_CONCURRENCY", 32), "jobs/workflows in flight (BENCH_CONCURRENCY)")
	flag.IntVar(&c.PoolSize, "pool", envInt("BENCH_POOL", 40), "Postgres pool size given to every system (BENCH_POOL)")
	flag.IntVar(&c.PgbenchSeconds, "pgbench-seconds", envInt("BENCH_PGBENCH_SECONDS", pick(10, 3)), "duration of each pgbench run (BENCH_PGBENCH_SECONDS)")
	flag.StringVar(&clients, "pgbench-clients", envStr("BENCH_PGBENCH_CLIENTS", "1,8,32"), "pgbench client counts (BENCH_PGBENCH_CLIENTS)")
	flag.IntVar(&c.SQLiteSeconds, "sqlite-seconds", envInt("BENCH_SQLITE_SECONDS", pick(5, 2)), "duration of each SQLite loop (BENCH_SQLITE_SECONDS)")
	flag.StringVar(&syncs, "sqlite-sync", envStr("BENCH_SQLITE_SYNC", "FULL,NORMAL"), "SQLite synchronous modes (BENCH_SQLITE_SYNC)")
	flag.StringVar(&only, "systems", envStr("BENCH_SYSTEMS", ""), "comma-separated system keys to run, default all (BENCH_SYSTEMS)")
	flag.StringVar(&timeout, "run-timeout", envStr("BENCH_RUN_TIMEOUT", "10m"), "limit for one run of one system (BENCH_RUN_TIMEOUT)")
	flag.StringVar(&c.Out, "out", envStr("BENCH_OUT", "BENCHMARKS.md"), "report path (BENCH_OUT)")
	flag.StringVar(&c.JSON, "json", envStr("BENCH_JSON", ""), "raw samples path, default beside the binary's scratch dir (BENCH_JSON)")
	flag.StringVar(&c.Pgbench, "pgbench", envStr("PGBENCH", "/usr/bin/pgbench"), "pgbench binary (PGBENCH)")
	flag.StringVar(&c.Scratch, "scratch", envStr("BENCH_SCRATCH", ""), "scratch directory for SQLite files, default a new temp dir (BENCH_SCRATCH)")
	flag.StringVar(&c.JobsRev, "jobs-rev", envStr("BENCH_JOBS_REV", ""), "revision of the engine checkout, for the report (BENCH_JOBS_REV)")
	flag.IntVar(&c.Retries, "retries", envInt("BENCH_RETRIES", 2), "re-runs of a measurement during which other processes used the CPU (BENCH_RETRIES)")
	var quietWait string
	flag.StringVar(&quietWait, "quiet-wait", envStr("BENCH_QUIET_WAIT", "60s"), "longest wait for an idle machine before each measurement (BENCH_QUIET_WAIT)")
	var replayEvents, timerWindow, timerLead, scenarios string
	flag.StringVar(&replayEvents, "replay-events", envStr("BENCH_REPLAY_EVENTS", pickStr("10000,100000", "1000")),
		"history lengths replayed in memory with replay.Check (BENCH_REPLAY_EVENTS)")
	flag.IntVar(&c.ResumeEvents, "resume-events", envInt("BENCH_RESUME_EVENTS", pick(100000, 1000)),
		"recorded events of the run that resumes from the store (BENCH_RESUME_EVENTS)")
	flag.IntVar(&c.BackfillRows, "backfill-rows", envInt("BENCH_BACKFILL_ROWS", pick(200000, 5000)),
		"rows of the table the backfill and the hand-written loop sweep (BENCH_BACKFILL_ROWS)")
	flag.IntVar(&c.BackfillPages, "backfill-pages", envInt("BENCH_BACKFILL_PAGES", pick(100000, 1000)),
		"completed pages of the backfill pass that resumes (BENCH_BACKFILL_PAGES)")
	flag.IntVar(&c.Timers, "timers", envInt("BENCH_TIMERS", pick(10000, 500)), "sleeping runs in the timer-lag scenario (BENCH_TIMERS)")
	flag.IntVar(&c.FairBacklog, "fair-backlog", envInt("BENCH_FAIR_BACKLOG", pick(50000, 2000)),
		"tenant A's backlog in the fairness scenario, before tenant B's 100 runs (BENCH_FAIR_BACKLOG)")
	flag.StringVar(&timerWindow, "timer-window", envStr("BENCH_TIMER_WINDOW", pickStr("10s", "2s")),
		"span over which the timers fall due (BENCH_TIMER_WINDOW)")
	flag.StringVar(&timerLead, "timer-lead", envStr("BENCH_TIMER_LEAD", "auto"),
		"first enqueue → first due time, the time the runs get to fall asleep; auto = 3s + 1ms per timer (BENCH_TIMER_LEAD)")
	flag.IntVar(&c.BulkJobs, "bulk-jobs", envInt("BENCH_BULK_JOBS", pick(20000, 2000)),
		"no-op jobs inserted in one bulk call (BENCH_BULK_JOBS)")
	flag.IntVar(&c.TxCount, "tx-count", envInt("BENCH_TX_COUNT", pick(5000, 1000)),
		"callers' transactions of the transactional-enqueue scenarios (BENCH_TX_COUNT)")
	flag.IntVar(&c.RelayRows, "relay-rows", envInt("BENCH_RELAY_ROWS", pick(2000, 500)),
		"staged outbox rows the relay publishes (BENCH_RELAY_ROWS)")
	flag.IntVar(&c.DrainJobs, "drain-jobs", envInt("BENCH_DRAIN_JOBS", pick(20000, 1000)),
		"no-op jobs inserted before the workers start, in the backlog drain (BENCH_DRAIN_JOBS)")
	flag.StringVar(&scenarios, "scenarios", envStr("BENCH_SCENARIOS", ""),
		"comma-separated sections to run, default all: "+strings.Join(allScenarios, ",")+" (BENCH_SCENARIOS)")
	var budget string
	flag.StringVar(&budget, "disturbance-budget", envStr("BENCH_DISTURBANCE_BUDGET", "6m"), "total time allowed for waiting for quiet and re-running disturbed measurements (BENCH_DISTURBANCE_BUDGET)")
	flag.Parse()
	var err error
	if c.QuietWait, err = time.ParseDuration(quietWait); err != nil {
		return c, fmt.Errorf("quiet wait: %w", err)
	}
	if c.DisturbanceBudget, err = time.ParseDuration(budget); err != nil {
		return c, fmt.Errorf("disturbance budget: %w", err)
	}

	c.AdminURL = os.Getenv("TEST_DATABASE_URL")
	if c.AdminURL == "" {
		return c, errors.New("TEST_DATABASE_URL is not set; run under scripts/with-postgres.sh")
	}
	if c.RunTimeout, err = time.ParseDuration(timeout); err != nil {
		return c, fmt.Errorf("run timeout: %w", err)
	}
	for _, f := range splitList(clients) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return c, fmt.Errorf("bad pgbench client count %q", f)
		}
		c.PgbenchClients = append(c.PgbenchClients, n)
	}
	for _, f := range splitList(syncs) {
		c.SQLiteSyncs = append(c.SQLiteSyncs, strings.ToUpper(f))
	}
	for _, f := range splitList(replayEvents) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return c, fmt.Errorf("bad replay history length %q", f)
		}
		c.ReplayEvents = append(c.ReplayEvents, n)
	}
	if c.TimerWindow, err = time.ParseDuration(timerWindow); err != nil || c.TimerWindow <= 0 {
		return c, fmt.Errorf("bad timer window %q", timerWindow)
	}
	if timerLead != "auto" {
		if c.TimerLead, err = time.ParseDuration(timerLead); err != nil || c.TimerLead <= 0 {
			return c, fmt.Errorf("bad timer lead %q (a duration, or auto)", timerLead)
		}
	}
	for _, f := range splitList(scenarios) {
		if !slices.Contains(allScenarios, f) {
			return c, fmt.Errorf("unknown scenario %q (have %s)", f, strings.Join(allScenarios, ", "))
		}
		c.Scenarios = append(c.Scenarios, f)
	}
	for _, k := range splitList(only) {
		if _, ok := systems.Lookup(k); !ok {
			return c, fmt.Errorf("unknown system %q (have %s)", k, strings.Join(systems.Keys(), ", "))
		}
		c.Systems = append(c.Systems, k)
	}
	if c.Runs < 1 || c.NoopJobs < 1 || c.TenStepRuns < 1 || c.Concurrency < 1 || c.ResumeEvents < 1 || c.Timers < 1 {
		return c, errors.New("runs, counts and concurrency must be positive")
	}
	return c, nil
}

// harness carries what every step of a run needs.
type harness struct {
	cfg     config
	admin   *pgx.Conn
	self    string // path of this binary, re-executed as the child
	scratch string
	samples []record.Sample
	start   time.Time
	// postmaster is the local server's pid, for Postgres' CPU share (0 if not readable).
	postmaster int
	// budget is what is left of the time allowed for waiting out, and re-running around,
	// other processes' load.
	budget time.Duration
}

func run(cfg config) error {
	ctx := context.Background()
	h := &harness{cfg: cfg, start: time.Now(), budget: cfg.DisturbanceBudget}
	var err error
	if h.self, err = os.Executable(); err != nil {
		return err
	}
	if h.admin, err = pgx.Connect(ctx, cfg.AdminURL); err != nil {
		return fmt.Errorf("connect to TEST_DATABASE_URL: %w", err)
	}
	defer h.admin.Close(ctx)

	h.scratch = cfg.Scratch
	if h.scratch == "" {
		if h.scratch, err = os.MkdirTemp("", "jobs-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(h.scratch)
	} else if err := os.MkdirAll(h.scratch, 0o755); err != nil {
		return err
	}

	info, err := collectInfo(ctx, h.admin, cfg, h.scratch)
	if err != nil {
		return err
	}
	var dataDir string
	if err := h.admin.QueryRow(ctx, `SHOW data_directory`).Scan(&dataDir); err == nil {
		if h.postmaster, err = measure.PostmasterPID(dataDir); err != nil {
			log.Printf("Postgres CPU will not be shown: %v", err)
		}
	}
	keys := cfg.Systems
	if len(keys) == 0 {
		keys = systems.Keys()
	}
	log.Printf("systems: %s; %d run(s) each; roughly %s", strings.Join(keys, ", "), cfg.Runs, estimate(cfg, keys).Round(time.Minute))

	// The order matters: the ceiling first and last (the machine drifts), the system runs
	// interleaved (run 1 of every system, then run 2, ...) so drift spreads across systems
	// instead of landing on whichever ran last.
	if cfg.runs(record.ScenarioPgbench) {
		h.pgbench(ctx, "before")
	}
	if cfg.runs(record.ScenarioSQLite) {
		h.sqlite(ctx)
	}
	if cfg.runs(systems.ScenarioNoop) {
		h.scenario(ctx, systems.ScenarioNoop, cfg.NoopJobs, keys)
	}
	if cfg.runs(systems.ScenarioTenStep) {
		h.scenario(ctx, systems.ScenarioTenStep, cfg.TenStepRuns, keys)
	}
	h.engineOnly(ctx, keys)
	if cfg.runs(record.ScenarioPgbench) {
		h.pgbench(ctx, "after")
	}

	info.Elapsed = time.Since(h.start)
	saved := savedRun{Info: info, Keys: keys, Samples: h.samples}
	if err := saved.write(cfg.JSON); err != nil {
		return err
	}
	md := withAnalysis(report.Render(info, h.samples, keys))
	if err := os.WriteFile(cfg.Out, []byte(md), 0o644); err != nil {
		return err
	}
	log.Printf("wrote %s in %s", cfg.Out, info.Elapsed.Round(time.Second))
	return nil
}

// estimate is a rough wall-clock forecast printed at start, from the ceilings seen on the
// reference machine (2 cores, PostgreSQL 15, fsync on). It only guides the choice of knobs.
func estimate(cfg config, keys []string) time.Duration {
	runs := time.Duration(cfg.Runs)
	d := 2 * runs * time.Duration(len(cfg.PgbenchClients)*(cfg.PgbenchSeconds+2)) * time.Second
	d += runs * time.Duration(len(cfg.SQLiteSyncs)*(cfg.SQLiteSeconds+1)) * time.Second
	// ~320 jobs/s for River at its defaults, ~1000/s for the others; ~40 runs/s of ten steps.
	d += runs * time.Duration(len(keys)) * (time.Duration(cfg.NoopJobs)*time.Second/1000 +
		time.Duration(cfg.TenStepRuns)*time.Second/40) / 2
	// Section 12: two worker counts at a few thousand jobs/s, plus the untimed load.
	d += runs * time.Duration(len(keys)) * 2 * (time.Duration(cfg.DrainJobs)*time.Second/2000 + 3*time.Second)
	// Ours only: replay.Check runs at least a second per length; writing a long history goes at
	// ~50k events/s; a timer run is its lead, its window and a little more. Plus set-up per run.
	ours := 0
	for _, k := range keys {
		if systems.IsOurs(k) {
			ours++
		}
	}
	if ours > 0 {
		d += runs * time.Duration(len(cfg.ReplayEvents)) * 3 * time.Second
		d += runs * time.Duration(ours) * (time.Duration(cfg.ResumeEvents)*time.Second/50000 + 3*time.Second)
		d += runs * time.Duration(ours) * (cfg.timerLead() + cfg.TimerWindow + 5*time.Second)
	}
	return d
}

// pgbench measures the commit ceiling at each client count, cfg.Runs times, in a database of
// its own.
func (h *harness) pgbench(ctx context.Context, phase string) {
	const db = "bench_pgbench"
	fail := func(err error) {
		for _, c := range h.cfg.PgbenchClients {
			h.add(record.Sample{Scenario: record.ScenarioPgbench, System: "pgbench", Label: "pgbench one-row INSERT",
				Concurrency: c, Phase: phase, Run: 1, Err: err.Error()})
		}
		log.Printf("pgbench %s: %v", phase, err)
	}
	if _, err := os.Stat(h.cfg.Pgbench); err != nil {
		fail(fmt.Errorf("pgbench not found: %w", err))
		return
	}
	dbURL, err := h.createDB(ctx, db)
	if err != nil {
		fail(err)
		return
	}
	defer h.dropDB(ctx, db)
	conn, err := pgx.Connect(ctx, dbURL)
	if err == nil {
		_, err = conn.Exec(ctx, limits.PgbenchTable)
		conn.Close(ctx)
	}
	if err != nil {
		fail(fmt.Errorf("create table: %w", err))
		return
	}
	for r := 1; r <= h.cfg.Runs; r++ {
		for _, c := range h.cfg.PgbenchClients {
			p := limits.Pgbench{Bin: h.cfg.Pgbench, DBURL: dbURL, DB: db, Admin: h.admin,
				Clients: c, Seconds: h.cfg.PgbenchSeconds, WorkDir: h.scratch, Postmaster: h.postmaster}
			h.add(h.measured(ctx, func() record.Sample {
				s, err := p.Run(ctx)
				s.Phase, s.Run = phase, r
				if err != nil {
					s.Err = err.Error()
				}
				return s
			}))
		}
	}
}

// sqlite runs the raw SQLite loop once per synchronous mode per run, each in a child process
// and a fresh directory.
func (h *harness) sqlite(ctx context.Context) {
	for r := 1; r <= h.cfg.Runs; r++ {
		for _, mode := range h.cfg.SQLiteSyncs {
			dir := filepath.Join(h.scratch, fmt.Sprintf("sqlite-%s-%d", strings.ToLower(mode), r))
			spec := childSpec{Kind: "sqlite", Run: r, Dir: dir, Sync: mode, Postmaster: h.postmaster,
				Duration: time.Duration(h.cfg.SQLiteSeconds) * time.Second, Timeout: h.cfg.RunTimeout}
			h.add(h.measured(ctx, func() record.Sample {
				defer os.RemoveAll(dir)
				s := h.child(ctx, spec)
				s.Scenario, s.System, s.Run = record.ScenarioSQLite, "sqlite", r
				if s.Label == "" {
					s.Label = "modernc.org/sqlite one-row INSERT"
				}
				if s.Sync == "" {
					s.Sync = mode
				}
				return s
			}))
		}
	}
}

// scenario runs one scenario for every system, run by run.
func (h *harness) scenario(ctx context.Context, scen string, n int, keys []string) {
	h.interleaved(ctx, []string{scen}, n, h.cfg.Concurrency, keys)
}

// interleaved runs scenarios for every system run by run, at a concurrency of its own (the
// drain's worker counts). Scenarios read against one another (fair claiming against
// oldest-first) go together: run 1 of each, then run 2 of each, as the systems alternate, so that
// the machine's drift over the minutes falls on both sides of a ratio alike.
func (h *harness) interleaved(ctx context.Context, scens []string, n, concurrency int, keys []string) {
	for r := 1; r <= h.cfg.Runs; r++ {
		for _, key := range keys {
			for _, scen := range scens {
				h.scenarioRun(ctx, scen, n, concurrency, key, r)
			}
		}
	}
}

// scenarioRun is run r of scenario scen on the system key, in a child process with a database
// of its own.
func (h *harness) scenarioRun(ctx context.Context, scen string, n, concurrency int, key string, r int) {
	factory, _ := systems.Lookup(key)
	sys := factory()
	base := record.Sample{Scenario: scen, System: key, Label: sys.Name(), Run: r, N: n, Concurrency: concurrency}
	if sk, ok := sys.(systems.Skipper); ok {
		if reason := sk.Skip(scen); reason != "" {
			if r == 1 {
				base.Skip = reason
				h.add(base)
			}
			return
		}
	}
	db := fmt.Sprintf("bench_%s_%s_%d", key, scen, r)
	dir := filepath.Join(h.scratch, db)
	h.add(h.measured(ctx, func() record.Sample {
		dbURL, err := h.createDB(ctx, db)
		if err != nil {
			base.Err = err.Error()
			return base
		}
		defer h.dropDB(ctx, db)
		defer os.RemoveAll(dir)
		spec := childSpec{Kind: "system", System: key, Scenario: scen, N: n, Concurrency: concurrency,
			Run: r, DBURL: dbURL, DB: db, AdminURL: h.cfg.AdminURL, Dir: dir, PoolSize: h.cfg.PoolSize,
			Timeout: h.cfg.RunTimeout, Postmaster: h.postmaster,
			TimerWindow: h.cfg.TimerWindow, TimerLead: h.cfg.timerLead()}
		s := h.child(ctx, spec)
		if s.Label == "" {
			s.Label = base.Label
		}
		s.Scenario, s.System, s.Run, s.N, s.Concurrency = scen, key, r, n, concurrency
		return s
	}))
}

// engineOnly runs scenarios 5 and 6, which only our engine implements: replay.Check in memory
// (once per history length, in the process of the first of our systems, since no store is
// involved), then the resume of a long history and the timer lag on each of our systems.
func (h *harness) engineOnly(ctx context.Context, keys []string) {
	var replayers, lagers []string
	for _, k := range keys {
		f, _ := systems.Lookup(k)
		sys := f()
		if _, ok := sys.(systems.Replayer); ok {
			replayers = append(replayers, k)
		}
		if _, ok := sys.(systems.TimerLagger); ok {
			lagers = append(lagers, k)
		}
	}
	if len(replayers) > 0 && h.cfg.runs(systems.ScenarioReplay) {
		for _, n := range h.cfg.ReplayEvents {
			h.scenario(ctx, systems.ScenarioReplay, n, replayers[:1])
		}
	}
	if len(replayers) > 0 && h.cfg.runs(systems.ScenarioResume) {
		h.scenario(ctx, systems.ScenarioResume, h.cfg.ResumeEvents, replayers)
	}
	if len(lagers) > 0 && h.cfg.runs(systems.ScenarioTimers) {
		h.scenario(ctx, systems.ScenarioTimers, h.cfg.Timers, lagers)
	}
	h.backfills(ctx, keys)
	h.section9(ctx, keys)
	h.fairness(ctx, keys)
	h.drain(ctx, keys)
}

// measured runs one measurement on a machine that is as quiet as it can get. Before the run it
// waits (up to BENCH_QUIET_WAIT) for the machine to be idle; after it, if processes outside the
// benchmark (another build or test sharing the machine) used more than foreignRetry points of
// CPU, it runs the measurement again, up to BENCH_RETRIES times, and keeps the least disturbed
// sample. Waiting and re-running both draw on one budget (BENCH_DISTURBANCE_BUDGET) so that a
// machine that never quietens down cannot stretch the suite without bound. What happened is
// recorded in the sample's Conditions, and the report flags a sample that stayed disturbed.
func (h *harness) measured(ctx context.Context, run func() record.Sample) record.Sample {
	var best record.Sample
	for attempt := 0; ; attempt++ {
		waited, busy := h.waitQuiet(ctx)
		t0 := time.Now()
		s := run()
		if attempt > 0 {
			h.spend(time.Since(t0))
		}
		if waited > time.Second {
			s.Conditions = joinNote(s.Conditions, fmt.Sprintf("waited %s for a quiet machine", waited.Round(time.Second)))
			if busy >= quietBusy {
				s.Conditions = joinNote(s.Conditions, fmt.Sprintf("still %.0f%% busy when the run started", busy))
			}
		}
		if attempt > 0 {
			s.Conditions = joinNote(s.Conditions, fmt.Sprintf("attempt %d", attempt+1))
		}
		if attempt == 0 || (s.OK() && (!best.OK() || s.ForeignCPU < best.ForeignCPU)) {
			best = s
		}
		if !s.OK() || s.ForeignCPU < foreignRetry || attempt >= h.cfg.Retries || h.budget <= 0 {
			break
		}
		log.Printf("  processes outside the benchmark used %.0f%% of the CPU; running it again", s.ForeignCPU)
	}
	if best.OK() && best.ForeignCPU >= foreignRetry {
		best.Conditions = joinNote(best.Conditions, fmt.Sprintf("processes outside the benchmark used %.0f%% of the CPU", best.ForeignCPU))
	}
	return best
}

// spend draws d from the disturbance budget, and says so when it runs out.
func (h *harness) spend(d time.Duration) {
	before := h.budget
	h.budget -= d
	if before > 0 && h.budget <= 0 {
		log.Printf("  disturbance budget (%s) spent: from now on measurements neither wait for a quiet machine nor re-run", h.cfg.DisturbanceBudget)
	}
}

const (
	// quietBusy is the machine CPU share under which the machine counts as idle before a run:
	// the harness' own Postgres is idle then, so anything above this is someone else.
	quietBusy = 15.0
	// foreignRetry is the share of CPU used by processes outside the benchmark during a run
	// above which the run is repeated.
	foreignRetry = 10.0
)

// waitQuiet samples machine CPU over half-second windows until one is below quietBusy, or
// QuietWait (or what is left of the disturbance budget) has passed, and returns how long it
// waited and the last reading.
func (h *harness) waitQuiet(ctx context.Context) (time.Duration, float64) {
	start := time.Now()
	limit := min(h.cfg.QuietWait, max(h.budget, 0))
	defer func() { h.spend(time.Since(start)) }()
	for {
		a, err := measure.ReadCPU()
		if err != nil {
			return 0, 0
		}
		select {
		case <-ctx.Done():
			return time.Since(start), 0
		case <-time.After(500 * time.Millisecond):
		}
		b, err := measure.ReadCPU()
		if err != nil {
			return 0, 0
		}
		busy := measure.BusyPercent(a, b)
		if busy < quietBusy || time.Since(start) >= limit {
			return time.Since(start), busy
		}
	}
}

// child runs spec in a child process and returns its sample; a child that dies without writing
// one (panic, timeout, OOM) becomes a sample with Err set to the end of its stderr.
func (h *harness) child(ctx context.Context, spec childSpec) record.Sample {
	fail := func(err error) record.Sample { return record.Sample{Err: err.Error()} }
	if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
		return fail(err)
	}
	// A checkpoint before every run, so none pays for the WAL of the one before.
	if _, err := h.admin.Exec(ctx, "CHECKPOINT"); err != nil {
		return fail(fmt.Errorf("checkpoint: %w", err))
	}
	specPath := filepath.Join(h.scratch, "spec.json")
	outPath := filepath.Join(h.scratch, "sample.json")
	os.Remove(outPath)
	raw, _ := json.Marshal(spec)
	if err := os.WriteFile(specPath, raw, 0o644); err != nil {
		return fail(err)
	}
	// The child enforces spec.Timeout itself; this outer limit only catches a child that
	// ignores its context.
	cctx, cancel := context.WithTimeout(ctx, spec.Timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, h.self, "child", specPath, outPath)
	var stderr tailBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	runErr := cmd.Run()

	var s record.Sample
	if raw, err := os.ReadFile(outPath); err == nil && json.Unmarshal(raw, &s) == nil {
		if s.Err != "" && stderr.Len() > 0 {
			s.Err += " [stderr: " + stderr.String() + "]"
		}
		return s
	}
	if runErr == nil {
		runErr = errors.New("child wrote no sample")
	}
	return fail(fmt.Errorf("%v: %s", runErr, stderr.String()))
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func (h *harness) add(s record.Sample) {
	h.samples = append(h.samples, s)
	log.Print(report.OneLine(s))
}

// createDB makes an empty database and returns its URL (the admin URL with the path replaced).
func (h *harness) createDB(ctx context.Context, db string) (string, error) {
	h.dropDB(ctx, db)
	if _, err := h.admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", db, err)
	}
	u, err := url.Parse(h.cfg.AdminURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + db
	return u.String(), nil
}

func (h *harness) dropDB(ctx context.Context, db string) {
	if _, err := h.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)"); err != nil {
		log.Printf("drop database %s: %v", db, err)
	}
}

// savedRun is everything the report is made from, so that it can be rendered again (after a
// change to the report's code) without measuring again: `bench render results.json OUT.md`.
type savedRun struct {
	Info    report.Info     `json:"info"`
	Keys    []string        `json:"keys"`
	Samples []record.Sample `json:"samples"`
}

func (r savedRun) write(path string) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}

// renderMain re-renders a saved run.
func renderMain(in, out string) error {
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var r savedRun
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	return os.WriteFile(out, []byte(withAnalysis(report.Render(r.Info, r.Samples, r.Keys))), 0o644)
}

// withAnalysis puts bench/ANALYSIS.md, the hand-written reading of the figures (where we stand
// against the targets and what bounds us), ahead of the generated tables. It is kept in its own
// file so that a new run regenerates the tables without losing the prose.
func withAnalysis(md string) string {
	path := os.Getenv("BENCH_ANALYSIS")
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return md
		}
		path = filepath.Join(filepath.Dir(exe), "..", "ANALYSIS.md")
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return md
	}
	i := strings.Index(md, "\n## Setup")
	if i < 0 {
		return md + "\n" + string(text)
	}
	return md[:i+1] + string(text) + "\n" + md[i+1:]
}

// tailBuffer keeps the last few KiB written to it: enough to explain a failure without letting
// a chatty library fill memory.
type tailBuffer struct{ b []byte }

const tailMax = 4096

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2*tailMax {
		t.b = append(t.b[:0], t.b[len(t.b)-tailMax:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) Len() int { return len(t.b) }

func (t *tailBuffer) String() string {
	s := strings.TrimSpace(string(t.b))
	if len(s) > tailMax {
		s = "…" + s[len(s)-tailMax:]
	}
	return strings.ReplaceAll(s, "\n", " | ")
}

func envStr(k, def string) string {
	if v, ok := os.LookupEnv(k); ok && v != "" {
		return v
	}
	return def
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return def
}

func envBool(k string) bool {
	v, _ := strconv.ParseBool(os.Getenv(k))
	return v
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
