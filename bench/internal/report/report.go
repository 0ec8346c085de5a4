// Package report turns samples into BENCHMARKS.md: medians per system and scenario, ratios to
// the commit ceiling and to our engine, the CPU and database cost beside every figure, and the
// failures, word for word.
package report

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ultimat3/jobs/bench/internal/record"
	"github.com/ultimat3/jobs/bench/systems"
)

// Info is everything the report says about the run besides the samples.
type Info struct {
	Date    time.Time
	Elapsed time.Duration
	Quick   bool

	Runs, NoopJobs, TenStepRuns, Concurrency, PoolSize int
	PgbenchSeconds, SQLiteSeconds                      int

	// Scenarios 5 and 6 (our engine only).
	ReplayEvents           []int
	ResumeEvents, Timers   int
	FairBacklog            int
	TimerWindow, TimerLead time.Duration
	// Section 8 (our engine only).
	BackfillRows, BackfillPages int
	// Section 9.
	BulkJobs, TxCount, RelayRows int
	// Section 12.
	DrainJobs int

	NProc                      int
	CPUModel, MemTotal, Kernel string
	GoVersion                  string
	PostgresVersion            string
	PostgresSettings           [][2]string
	PgbenchVersion             string
	SQLiteVersion              string
	PGDataFS, ScratchFS        string
	Modules                    [][2]string // module path, version
	Systems                    []SystemInfo
	JobsRev                    string
}

// SystemInfo describes one registered system.
type SystemInfo struct {
	Key, Name, Module, Version string
}

// cpuBound is the machine CPU share above which a figure is called CPU-bound: with two cores and
// the load generator, the engine and Postgres on them, little more can be had.
const cpuBound = 85.0

// group is the samples of one row of a table.
type group struct {
	key      string
	label    string
	ok       []record.Sample
	failed   []record.Sample
	skip     string
	backend  string
	note     string
	attempts int
	dropped  int // good runs left out of the medians because others disturbed them
}

func (g *group) add(s record.Sample) {
	g.attempts++
	if g.label == "" {
		g.label = s.Label
	}
	switch {
	case s.Skip != "":
		g.skip = s.Skip
	case s.OK():
		g.ok = append(g.ok, s)
		if s.Backend != "" {
			g.backend = s.Backend
		}
		if s.Note != "" {
			g.note = s.Note
		}
	default:
		g.failed = append(g.failed, s)
	}
}

// med is the median of f over the group's good runs (NaN if none).
func (g *group) med(f func(record.Sample) float64) float64 {
	var v []float64
	for _, s := range g.ok {
		if x := f(s); !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	return median(v)
}

func (g *group) spread() (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range g.ok {
		lo, hi = min(lo, s.Rate), max(hi, s.Rate)
	}
	return lo, hi
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	v = slices.Clone(v)
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// perUnit returns a per-unit PG counter extractor: divide by Steps when the scenario has steps.
func perUnit(pick func(s record.Sample) float64, bySteps bool) func(record.Sample) float64 {
	return func(s record.Sample) float64 {
		if s.PG == nil {
			return math.NaN()
		}
		d := float64(s.Units)
		if bySteps {
			d = float64(s.Steps)
		}
		if d == 0 {
			return math.NaN()
		}
		return pick(s) / d
	}
}

// commitsCell is the median commits per unit, with rollbacks beside it when there are any worth
// showing: a rolled-back transaction is a round trip too, if usually not an fsync.
func commitsCell(g *group, bySteps bool) string {
	c := num(g.med(perUnit(commits, bySteps)), 2)
	if r := g.med(perUnit(rbk, bySteps)); r >= 0.01 {
		c += " (+" + num(r, 2) + " rb)"
	}
	return c
}

var (
	commits = func(s record.Sample) float64 { return float64(s.PG.XactCommit) }
	rows    = func(s record.Sample) float64 { return float64(s.PG.RowsWritten()) }
	walB    = func(s record.Sample) float64 { return float64(s.PG.WALBytes) }
	ins     = func(s record.Sample) float64 { return float64(s.PG.TupInserted) }
	upd     = func(s record.Sample) float64 { return float64(s.PG.TupUpdated) }
	del     = func(s record.Sample) float64 { return float64(s.PG.TupDeleted) }
	rbk     = func(s record.Sample) float64 { return float64(s.PG.XactRollback) }
	sess    = func(s record.Sample) float64 {
		if s.PG == nil {
			return math.NaN()
		}
		return float64(s.PG.Sessions)
	}
	rate = func(s record.Sample) float64 { return s.Rate }
	mcpu = func(s record.Sample) float64 { return s.MachineCPU }
	lcpu = func(s record.Sample) float64 { return s.LoadCPU }
	pcpu = func(s record.Sample) float64 { return unknownNaN(s.PostgresCPU) }
	ocpu = func(s record.Sample) float64 { return unknownNaN(s.OtherCPU()) }
	fcpu = func(s record.Sample) float64 { return unknownNaN(s.ForeignCPU) }
)

func unknownNaN(v float64) float64 {
	if v < 0 {
		return math.NaN()
	}
	return v
}

// foreignWarn is the share of the machine used by processes outside the benchmark above which
// a figure is flagged: something else was running and the figure is suspect.
const foreignWarn = 10.0

// cpuCell shows machine CPU and its split: "97% (23/70/4)" is 97% of both cores busy, of which
// 23 points the driving process, 70 Postgres and 4 the rest (kernel work such as loopback
// networking and block I/O, and anything else running).
func cpuCell(g *group) string {
	return cpuText(g.med(mcpu), g.med(lcpu), g.med(pcpu), g.med(ocpu), g.med(fcpu))
}

func cpuText(m, l, p, o, f float64) string {
	c := fmt.Sprintf("%s (%s/?/?)", pct(m), num0(l))
	if !math.IsNaN(p) {
		c = fmt.Sprintf("%s (%s/%s/%s)", pct(m), num0(l), num0(p), num0(o))
	}
	if f >= foreignWarn {
		c += fmt.Sprintf(" ⚠ foreign %.0f", f)
	}
	return c
}

func num0(v float64) string {
	if math.IsNaN(v) {
		return "?"
	}
	return fmt.Sprintf("%.0f", v)
}

// groups collects the samples of one scenario by system key (and by a sub-key for pgbench and
// SQLite), in the order given.
func groups(samples []record.Sample, scenario string, sub func(record.Sample) string) (map[string]*group, []string) {
	m := map[string]*group{}
	var order []string
	for _, s := range samples {
		if s.Scenario != scenario {
			continue
		}
		k := s.System
		if sub != nil {
			k += "|" + sub(s)
		}
		g, ok := m[k]
		if !ok {
			g = &group{key: s.System}
			m[k] = g
			order = append(order, k)
		}
		g.add(s)
	}
	for _, g := range m {
		g.preferClean()
	}
	return m, order
}

// preferClean drops the runs that other processes disturbed when undisturbed ones exist, so a
// median is not dragged by someone else's build; the count dropped is shown beside the figure.
func (g *group) preferClean() {
	var clean []record.Sample
	for _, s := range g.ok {
		if s.ForeignCPU < foreignWarn {
			clean = append(clean, s)
		}
	}
	if len(clean) > 0 && len(clean) < len(g.ok) {
		g.dropped = len(g.ok) - len(clean)
		g.ok = clean
	}
}

// Render writes the whole report.
func Render(in Info, samples []record.Sample, keys []string) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }

	w("# Benchmarks\n\n")
	w("<!-- Generated by bench/run.sh (`make bench`); edit the generator, not this file. -->\n\n")
	if in.Quick {
		w("> **QUICK MODE (BENCH_QUICK=1)**: tiny counts and one run each. This file proves the pipeline works; its figures are not measurements. Run `make bench` for real ones.\n\n")
	}
	w("Reproduce with `make bench` (which runs `scripts/with-postgres.sh bench/run.sh`) from the repository root. ")
	w("Each scenario ran %d time(s); tables show the median, with the range over runs where there was more than one. ", in.Runs)
	w("Every figure has the machine's CPU use over the same window beside it, and the Postgres work it cost. ")
	w("The machine is shared with other work while the suite runs, so CPU figures and absolute rates are noisy (⚠ marks the disturbed ones); compare systems within one run, where each scenario ran every system side by side, run by run, interleaved.\n\n")

	ceiling := renderSetup(w, in)
	renderPgbench(w, samples, in)
	renderScenario(w, samples, keys, in, systems.ScenarioNoop, ceiling)
	renderScenario(w, samples, keys, in, systems.ScenarioTenStep, ceiling)
	renderSQLite(w, samples, in)
	renderReplay(w, samples, keys, in)
	renderTimers(w, samples, keys, in)
	renderCost(w, samples, keys)
	renderBackfills(w, samples, keys, in)
	renderSection9(w, samples, keys, in)
	renderFairness(w, samples, keys, in)
	renderDrain(w, samples, keys, in)
	renderNotes(w, in)
	renderFailures(w, samples)
	renderAll(w, samples)
	return b.String()
}

// renderSetup prints the machine and software, and returns the commit ceiling used for ratios:
// the median pgbench rate at the scenarios' concurrency (or the highest client count measured),
// over both phases.
func renderSetup(w func(string, ...any), in Info) func(samples []record.Sample) (float64, int) {
	w("## Setup\n\n")
	w("| | |\n|---|---|\n")
	w("| date | %s (took %s) |\n", in.Date.Format("2006-01-02 15:04 UTC"), in.Elapsed.Round(time.Second))
	w("| machine | %d cores (`nproc`), %s RAM, CPU %s, Linux %s |\n", in.NProc, in.MemTotal, in.CPUModel, in.Kernel)
	w("| filesystems | Postgres data: %s; SQLite scratch: %s |\n", in.PGDataFS, in.ScratchFS)
	w("| Go | %s |\n", in.GoVersion)
	var set []string
	for _, kv := range in.PostgresSettings {
		set = append(set, kv[0]+"="+kv[1])
	}
	w("| PostgreSQL | %s (throwaway cluster from scripts/with-postgres.sh; %s) |\n", in.PostgresVersion, strings.Join(set, ", "))
	w("| pgbench | %s |\n", in.PgbenchVersion)
	w("| SQLite | %s (via modernc.org/sqlite) |\n", in.SQLiteVersion)
	for _, m := range in.Modules {
		v := m[1]
		if v == "(devel)" {
			// A directory replace (our own engine through `replace ... => ../`) has no version.
			v = "local checkout (replace => ../)"
		}
		w("| `%s` | %s |\n", m[0], v)
	}
	if in.JobsRev != "" {
		w("| jobs checkout | %s |\n", in.JobsRev)
	}
	w("| load | no-op: %d jobs; ten-step: %d runs; %d in flight; Postgres pool of %d connections for every system; pgbench %d s per run; SQLite %d s per run",
		in.NoopJobs, in.TenStepRuns, in.Concurrency, in.PoolSize, in.PgbenchSeconds, in.SQLiteSeconds)
	if in.Timers > 0 {
		w("; replay: %s-event histories in memory, resume of %d events; timers: %d over %s, lead %s",
			joinInts(in.ReplayEvents), in.ResumeEvents, in.Timers, in.TimerWindow, in.TimerLead)
	}
	w(" |\n\n")

	return func(samples []record.Sample) (float64, int) {
		m, order := groups(samples, record.ScenarioPgbench, func(s record.Sample) string { return fmt.Sprint(s.Concurrency) })
		best, bestC := math.NaN(), 0
		for _, k := range order {
			g := m[k]
			if len(g.ok) == 0 {
				continue
			}
			c := g.ok[0].Concurrency
			if c == in.Concurrency || (bestC != in.Concurrency && c > bestC) {
				best, bestC = g.med(rate), c
			}
		}
		return best, bestC
	}
}

func renderPgbench(w func(string, ...any), samples []record.Sample, in Info) {
	w("## 1. Commit ceiling: pgbench one-row INSERT\n\n")
	w("One row per transaction (`INSERT INTO ins (k, c) VALUES (random(1, 9000000000000000000), client_id)`, primary key on both columns), `-M prepared`, table truncated and a CHECKPOINT before each run. ")
	w("Measured before and after everything else, because the machine drifts. This is what the machine can commit; every Postgres-backed figure below should be read against it.\n\n")
	w("| clients | before: tx/s | CPU (pgbench/pg/other) | after: tx/s | CPU (pgbench/pg/other) | commits/tx | rows/tx | WAL B/tx |\n")
	w("|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	m, _ := groups(samples, record.ScenarioPgbench, func(s record.Sample) string { return s.Phase + "|" + fmt.Sprint(s.Concurrency) })
	var clients []int
	for _, s := range samples {
		if s.Scenario == record.ScenarioPgbench && !slices.Contains(clients, s.Concurrency) {
			clients = append(clients, s.Concurrency)
		}
	}
	sort.Ints(clients)
	for _, c := range clients {
		bg, ag := m[fmt.Sprintf("pgbench|before|%d", c)], m[fmt.Sprintf("pgbench|after|%d", c)]
		cell := func(g *group) string {
			if g == nil {
				return "— | —"
			}
			if len(g.ok) == 0 {
				return "failed | —"
			}
			return fmt.Sprintf("%s | %s", rateCell(g), cpuCell(g))
		}
		both := &group{}
		for _, g := range []*group{bg, ag} {
			if g != nil {
				both.ok = append(both.ok, g.ok...)
			}
		}
		w("| %d | %s | %s | %s | %s | %s |\n", c, cell(bg), cell(ag),
			num(both.med(perUnit(commits, false)), 2), num(both.med(perUnit(rows, false)), 2), num(both.med(perUnit(walB, false)), 0))
	}
	w("\n")
}

// scenarioText describes each system scenario.
var scenarioText = map[string]struct{ title, unit, intro string }{
	systems.ScenarioNoop: {"2. No-op jobs, enqueue → completed", "job",
		"Each system completes %d jobs that do nothing, with %d in flight: River with MaxWorkers %[2]d and %[2]d producers inserting one job per call, counted from its completion events and checked against `river_job`; " +
			"DBOS with %[2]d goroutines each calling RunWorkflow + GetResult on a workflow with no steps. The clock covers enqueue to last completion."},
	systems.ScenarioTenStep: {"3. Ten-step workflows", "step",
		"Each system completes %d workflow runs of 10 durable no-op steps each, %d in flight: %[2]d goroutines each start a run and wait for its result (DBOS: RunWorkflow + GetResult with 10 RunAsStep; go-workflows: CreateWorkflowInstance + GetWorkflowResult, 10 activities). The clock covers start to last result."},
}

func renderScenario(w func(string, ...any), samples []record.Sample, keys []string, in Info, scen string, ceilingOf func([]record.Sample) (float64, int)) {
	t := scenarioText[scen]
	n := in.NoopJobs
	if scen == systems.ScenarioTenStep {
		n = in.TenStepRuns
	}
	ceiling, ceilC := ceilingOf(samples)
	steps := scen == systems.ScenarioTenStep

	w("## %s\n\n", t.title)
	w(t.intro+"\n\n", n, in.Concurrency)
	if steps {
		w("| system | backend | runs/s | steps/s | ÷ jobs | steps/s ÷ ceiling | CPU (bench/pg/other) | commits/step | rows/step | WAL B/step | likely bound |\n")
		w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	} else {
		w("| system | backend | jobs/s | ÷ jobs | ÷ ceiling | CPU (bench/pg/other) | commits/job | rows/job | WAL B/job | likely bound |\n")
		w("|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	}
	m, _ := groups(samples, scen, nil)

	// Our engine's median is the denominator of the "÷ jobs" column.
	ours := math.NaN()
	for _, k := range keys {
		if g := m[k]; g != nil && systems.IsOurs(k) && len(g.ok) > 0 {
			ours = g.med(rate)
			break
		}
	}
	cols := 10
	if steps {
		cols = 11
	}
	// The engine's row is always there: a placeholder until bench/systems/jobs.go registers
	// it, or a pointer to BENCH_SYSTEMS when it was left out of this run.
	ranOurs, registered := false, false
	for _, k := range keys {
		ranOurs = ranOurs || systems.IsOurs(k)
	}
	// What was registered when the run was measured, not in the binary rendering it.
	for _, si := range in.Systems {
		registered = registered || systems.IsOurs(si.Key)
	}
	if !ranOurs {
		why := "_slot: not registered yet (add bench/systems/jobs.go, see bench/README.md)_"
		if registered {
			why = "_registered but not in this run (BENCH_SYSTEMS)_"
		}
		w("| **jobs** (our engine) | — | %s%s\n", why, strings.Repeat(" | —", cols-3)+" |")
	}
	for _, k := range keys {
		g := m[k]
		if g == nil {
			continue
		}
		name := g.label
		if systems.IsOurs(k) {
			name = "**" + name + "**"
		}
		if len(g.ok) == 0 {
			why := "n/a: " + g.skip
			if g.skip == "" {
				why = fmt.Sprintf("**failed** (%d of %d runs; see Failures)", len(g.failed), g.attempts)
			}
			w("| %s | %s%s\n", name, why, strings.Repeat(" | —", cols-2)+" |")
			continue
		}
		r := g.med(rate)
		vsOurs := "—"
		if !math.IsNaN(ours) {
			vsOurs = num(r/ours, 2) + "×"
		}
		partial := ""
		if len(g.failed) > 0 {
			partial = fmt.Sprintf(" (%d of %d runs failed)", len(g.failed), g.attempts)
		}
		bound := likelyBound(g, in)
		if steps {
			sr := g.med(func(s record.Sample) float64 { return float64(s.Steps) / s.Seconds })
			w("| %s | %s | %s%s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, g.backend, rateCell(g), partial, num(sr, 0), vsOurs,
				ratio(sr, ceiling), cpuCell(g),
				commitsCell(g, true), num(g.med(perUnit(rows, true)), 2), num(g.med(perUnit(walB, true)), 0), bound)
		} else {
			w("| %s | %s | %s%s | %s | %s | %s | %s | %s | %s | %s |\n", name, g.backend, rateCell(g), partial, vsOurs,
				ratio(r, ceiling), cpuCell(g),
				commitsCell(g, false), num(g.med(perUnit(rows, false)), 2), num(g.med(perUnit(walB, false)), 0), bound)
		}
	}
	if !math.IsNaN(ceiling) {
		w("\nCeiling: pgbench median at %d clients, %s tx/s (before and after runs pooled). ", ceilC, num(ceiling, 0))
	} else {
		w("\nCeiling: no pgbench figure, so no ratio to it. ")
	}
	w("CPU is the machine's busy share of both cores, split into the bench process (which holds the system under test: library, workers and callers), the Postgres server, and the rest (kernel work on the workload's behalf, such as loopback networking and block I/O, and anything else). \"⚠ foreign N\" marks a median run during which processes outside the benchmark, measured one by one, used N%% ≥ %.0f of the machine: the figure was taken on a shared machine.\n\n", foreignWarn)
	for _, k := range keys {
		if g := m[k]; g != nil && g.note != "" {
			w("- %s: %s\n", g.label, g.note)
		}
	}
	w("\n")
}

// likelyBound names what most plausibly limits a figure, from what was measured. It is a
// reading aid, not a proof: the Notes section explains each case.
func likelyBound(g *group, in Info) string {
	c := g.med(mcpu)
	r := g.med(rate)
	switch {
	case g.med(fcpu) >= foreignWarn:
		return fmt.Sprintf("unclear: processes outside the benchmark used %.0f%% of the CPU", g.med(fcpu))
	case g.key == "river_defaults" && r <= 1.15*float64(in.Concurrency)/0.1:
		return "FetchCooldown: ≤ MaxWorkers jobs per 100 ms"
	case c >= cpuBound:
		return "CPU (machine ≥ 85% busy)"
	case math.IsNaN(g.med(perUnit(commits, false))) && g.med(lcpu) >= 0.8*100/float64(max(in.NProc, 1)):
		// No Postgres work and one core's worth of CPU: a single-connection embedded store.
		return "CPU: one core (single-connection store)"
	case strings.HasPrefix(g.key, "goworkflows"):
		return "waiting: result polling / single-writer store (CPU idle)"
	default:
		return "waiting: commit latency, polling or locks (CPU idle)"
	}
}

func renderSQLite(w func(string, ...any), samples []record.Sample, in Info) {
	w("## 4. Embedded reference: raw SQLite one-row INSERT\n\n")
	w("modernc.org/sqlite (pure Go), WAL journal, one connection, each one-row INSERT its own transaction, for %d s. ", in.SQLiteSeconds)
	w("`synchronous=FULL` fsyncs the WAL at every commit and is the honest durable setting; `NORMAL` in WAL mode syncs only at checkpoints and can lose the last commits on power loss (not on a process crash). Both are shown; compare an embedded store with the FULL row unless it says otherwise.\n\n")
	w("| synchronous | commits/s | CPU (bench/pg/other) | filesystem | likely bound |\n|---|---:|---:|---|---|\n")
	m, order := groups(samples, record.ScenarioSQLite, func(s record.Sample) string { return s.Sync })
	for _, k := range order {
		g := m[k]
		mode := strings.TrimPrefix(k, "sqlite|")
		if len(g.ok) == 0 {
			w("| %s | **failed** (see Failures) | — | %s | — |\n", mode, in.ScratchFS)
			continue
		}
		bound := "fsync latency (the writer's core is mostly waiting)"
		// One core of the machine is 100/NProc percent: a writer using most of it is CPU-bound.
		if g.med(lcpu) >= 0.8*100/float64(max(in.NProc, 1)) {
			bound = "CPU (the single writer's core)"
		}
		w("| %s | %s | %s | %s | %s |\n", mode, rateCell(g), cpuCell(g), in.ScratchFS, bound)
	}
	w("\n")
}

func renderCost(w func(string, ...any), samples []record.Sample, keys []string) {
	w("## 7. Cost per unit of work\n\n")
	w("`pg_stat_database` deltas for the run's own database (read after the system closed and its backends exited, so nothing is left unflushed), divided by jobs (no-op) or by steps (ten-step); WAL bytes from `pg_current_wal_insert_lsn()` (cluster-wide, and nothing else ran). ")
	w("`xact_commit` counts every transaction, read-only ones included, so polling shows up here as well as writing.\n\n")
	w("| scenario | system | per | commits | rollbacks | tup_inserted | tup_updated | tup_deleted | rows written | WAL bytes | connections opened (per run) |\n")
	w("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, scen := range []string{systems.ScenarioNoop, systems.ScenarioTenStep} {
		m, _ := groups(samples, scen, nil)
		steps := scen == systems.ScenarioTenStep
		for _, k := range keys {
			g := m[k]
			if g == nil || len(g.ok) == 0 {
				continue
			}
			per := "job"
			if steps {
				per = "step"
			}
			if math.IsNaN(g.med(perUnit(commits, steps))) {
				w("| %s | %s | %s | — | — | — | — | — | — | — | — (no Postgres: %s) |\n", scen, g.label, per, g.backend)
				continue
			}
			w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", scen, g.label, per,
				num(g.med(perUnit(commits, steps)), 2), num(g.med(perUnit(rbk, steps)), 3),
				num(g.med(perUnit(ins, steps)), 2), num(g.med(perUnit(upd, steps)), 2), num(g.med(perUnit(del, steps)), 2),
				num(g.med(perUnit(rows, steps)), 2), num(g.med(perUnit(walB, steps)), 0), num(g.med(sess), 0))
		}
	}
	w("\n")
}

func renderNotes(w func(string, ...any), in Info) {
	w("## Notes: what bounds each figure\n\n")
	w(`- **Two cores for everything.** Postgres, the system under test and its callers share them. CPU cells read "machine (driver/pg/other)": machine is /proc/stat busy time (not idle, not iowait) over the timed window as a share of both cores; driver is the bench process holding the system under test (or pgbench) from its rusage; pg is the Postgres server (postmaster, its live children, and the children that exited, from /proc); other is what remains: the kernel's work on the workload's behalf (softirq time for loopback traffic between client and server, block I/O workers for fsyncs) and anything else. Processes outside the benchmark are also measured one by one ("foreign", from /proc, including children they reaped); a run during which they used ≥ 10%% of the machine is re-run up to BENCH_RETRIES times, and one that stays disturbed is marked ⚠. At ≥ 85%% machine CPU a figure is CPU-bound and measures how much work each unit costs, not how fast the design could go on a bigger machine.
- **pgbench** at 1 client is bound by commit (WAL fsync) latency; at 8 and 32 clients group commit lets several transactions share an fsync, until the CPU runs out. It is the upper bound for any system that commits once per unit of work on this machine.
- **River (defaults)**: FetchCooldown 100 ms and FetchPollInterval 1 s let a queue take at most MaxWorkers jobs per 100 ms (%d workers → about %d jobs/s). That is a setting, not the database. **River (tuned)** uses the values of River's own benchmark (FetchCooldown 2 ms, FetchPollInterval 20 ms) and is the River figure to compare against. River completes jobs in batches, so its commits per job can be below one.
- **DBOS Transact** is driven through RunWorkflow + GetResult (its fast path, about one commit per step plus the workflow's own status writes); its queue mode, which polls every second by default, is not used.
- **go-workflows version**: the module proxy's "@latest" for github.com/cschleiden/go-workflows resolves to v1.2.0, which has no Postgres backend (it came in v1.4.0); the newest version the proxy serves was taken (see Setup) and its Postgres backend works, so it is the primary go-workflows row. Its SQLite backend is shown as a second, labelled row because it is the nearest peer to an embedded store.
- **go-workflows** (Postgres) is given SetMaxIdleConns equal to its pool size. Its backend uses database/sql, whose default keeps two idle connections: with 32 callers it then opens a fresh Postgres connection (a backend start-up) for most operations, and in a trial run it went about five times slower with machine CPU saturated by connection start-ups, which would measure database/sql's default rather than go-workflows. The "connections opened" column in section 7 shows what each system's pool did.
- **go-workflows**: each step is a round trip workflow task → activity task → workflow task through the backend, and callers wait through GetWorkflowResult, which polls the instance state with exponential back-off (1 ms × 1.5 up to 1 s), adding latency to every run in a closed loop. The SQLite backend uses one connection, so it is single-writer and single-core bound.
- **Raw SQLite** has one writer by design; with synchronous=FULL each commit waits for an fsync of the WAL.
- **Fairness**: every Postgres-backed system gets a fresh database per run, the same pool size (%d), a CHECKPOINT before the run, and its own process (nothing carries over between runs). Setup (migrations, client start) is outside the timed window. Statistics cover the timed window plus the system's shutdown; background work a system does while running (leader election, maintenance, polling) is part of its cost and is included.
- **Autovacuum** may run during a window; its WAL is counted and its transactions are not (it is not a client backend).
`, in.Concurrency, in.Concurrency*10, in.PoolSize)
	w("\n")
}

func renderFailures(w func(string, ...any), samples []record.Sample) {
	w("## Failures and n/a\n\n")
	listed := false
	seen := map[string]bool{}
	for _, s := range samples {
		switch {
		case s.Skip != "":
			k := s.Scenario + "|" + s.System
			if seen[k] {
				continue
			}
			seen[k] = true
			w("- n/a: %s, %s: %s\n", nameOf(s), s.Scenario, s.Skip)
		case s.Err != "":
			w("- **failed**: %s, %s, run %d: %s\n", nameOf(s), scenarioName(s), s.Run, clip(s.Err, 800))
		default:
			continue
		}
		listed = true
	}
	if !listed {
		w("None.\n")
	}
	w("\n")
}

func renderAll(w func(string, ...any), samples []record.Sample) {
	w("<details><summary>Every run</summary>\n\n")
	w("| scenario | system | run | units | seconds | rate/s | CPU (driver/pg/other) | commits | rows written | WAL bytes | conditions |\n")
	w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, s := range samples {
		if !s.OK() {
			continue
		}
		c, r, wb := "—", "—", "—"
		if s.PG != nil {
			c, r, wb = fmt.Sprint(s.PG.XactCommit), fmt.Sprint(s.PG.RowsWritten()), fmt.Sprint(s.PG.WALBytes)
		}
		w("| %s | %s | %d | %d | %.2f | %s | %s | %s | %s | %s | %s |\n", scenarioName(s), nameOf(s), s.Run, s.Units, s.Seconds,
			num(s.Rate, 1), cpuText(s.MachineCPU, s.LoadCPU, unknownNaN(s.PostgresCPU), unknownNaN(s.OtherCPU()), unknownNaN(s.ForeignCPU)), c, r, wb, clip(s.Conditions, 160))
	}
	w("\n</details>\n")
}

// OneLine summarises a sample for the progress log.
func OneLine(s record.Sample) string {
	head := fmt.Sprintf("%-8s %-28s run %d", scenarioName(s), clip(nameOf(s), 28), s.Run)
	switch {
	case s.Skip != "":
		return head + ": n/a: " + s.Skip
	case s.Err != "":
		return head + ": FAILED: " + clip(s.Err, 300)
	}
	line := fmt.Sprintf("%s: %d in %.2fs = %s/s, CPU %s", head, s.Units, s.Seconds, num(s.Rate, 1),
		cpuText(s.MachineCPU, s.LoadCPU, unknownNaN(s.PostgresCPU), unknownNaN(s.OtherCPU()), unknownNaN(s.ForeignCPU)))
	if s.PG != nil && s.Units > 0 {
		d := float64(s.Units)
		if s.Steps > 0 {
			d = float64(s.Steps)
		}
		line += fmt.Sprintf(", per unit: %.2f commits, %.2f rollbacks, %.2f rows, %.0f WAL B; %d connections opened",
			float64(s.PG.XactCommit)/d, float64(s.PG.XactRollback)/d, float64(s.PG.RowsWritten())/d, float64(s.PG.WALBytes)/d, s.PG.Sessions)
	}
	line += engineLine(s)
	if s.Conditions != "" {
		line += " [" + s.Conditions + "]"
	}
	return line
}

func scenarioName(s record.Sample) string {
	switch s.Scenario {
	case record.ScenarioPgbench:
		return fmt.Sprintf("pgbench(%s,c=%d)", s.Phase, s.Concurrency)
	case record.ScenarioSQLite:
		return "sqlite(" + s.Sync + ")"
	case systems.ScenarioReplay, systems.ScenarioResume, systems.ScenarioTimers,
		systems.ScenarioBackfill, systems.ScenarioBackfillOverlap, systems.ScenarioBackfillLoop, systems.ScenarioBackfillResume,
		systems.ScenarioFairness, systems.ScenarioFairnessOldest, systems.ScenarioFairnessEmpty:
		return fmt.Sprintf("%s(%d)", s.Scenario, s.N)
	}
	return s.Scenario
}

func nameOf(s record.Sample) string {
	if s.Label != "" {
		return s.Label
	}
	return s.System
}

// rateCell is the median rate, with the range over runs when there was more than one.
func rateCell(g *group) string {
	r := g.med(rate)
	c := num(r, 0)
	if len(g.ok) >= 2 {
		lo, hi := g.spread()
		c = fmt.Sprintf("%s (%s–%s)", num(r, 0), num(lo, 0), num(hi, 0))
	}
	if g.dropped > 0 {
		c += fmt.Sprintf(" [%d disturbed run(s) left out]", g.dropped)
	}
	return c
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "—"
	}
	return num(a/b, 2) + "×"
}

func num(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	if prec == 0 && math.Abs(v) < 10 && v != 0 {
		prec = 1
	}
	return fmt.Sprintf("%.*f", prec, v)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", v)
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
