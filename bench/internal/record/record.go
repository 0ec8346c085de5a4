// Package record defines one measured run as the harness stores it (results.json) and the
// report reads it.
package record

import (
	"math"
	"slices"
	"time"

	"github.com/ultimat3/jobs/bench/internal/measure"
)

// Scenario identifiers beyond the systems' own (systems.ScenarioNoop, systems.ScenarioTenStep).
const (
	ScenarioPgbench = "pgbench" // one-row INSERT commit ceiling
	ScenarioSQLite  = "sqlite"  // raw SQLite one-row INSERT commit loop
)

// Sample is one run of one scenario on one system.
type Sample struct {
	Scenario string `json:"scenario"`
	System   string `json:"system"` // registry key, or "pgbench" / "sqlite"
	Label    string `json:"label"`  // name shown in the tables
	Run      int    `json:"run"`    // 1-based

	// Scenario parameters.
	N           int    `json:"n,omitempty"`           // jobs or runs asked for
	Concurrency int    `json:"concurrency,omitempty"` // callers / workers / pgbench clients
	Phase       string `json:"phase,omitempty"`       // pgbench: "before" or "after" the other scenarios
	Sync        string `json:"sync,omitempty"`        // sqlite: synchronous mode in force

	// Outcome.
	Units   int     `json:"units"`   // jobs, workflow runs, or transactions completed and verified
	Steps   int     `json:"steps"`   // durable steps among them (tenstep)
	Seconds float64 `json:"seconds"` // timed window
	Rate    float64 `json:"rate"`    // units per second over the timed window

	// Context, measured over the timed window.
	MachineCPU float64 `json:"machine_cpu"` // % of all cores busy (/proc/stat)
	LoadCPU    float64 `json:"load_cpu"`    // % of all cores used by the driving process (bench child or pgbench)
	// PostgresCPU is the Postgres server's share (% of all cores); negative when unknown.
	PostgresCPU float64 `json:"postgres_cpu"`
	// ForeignCPU is the share used by processes outside the benchmark (another build or test
	// on the machine), measured process by process; negative when unknown.
	ForeignCPU float64 `json:"foreign_cpu"`

	// Replay and resume (scenarios replay, resume): events replayed in the window, and the
	// process's heap allocations over it.
	Events      int     `json:"events,omitempty"`
	AllocBytes  uint64  `json:"alloc_bytes,omitempty"`
	Allocs      uint64  `json:"allocs,omitempty"`
	HistoryRead float64 `json:"history_read_seconds,omitempty"` // resume: time spent reading the history

	// Timer lag (scenario timers).
	Lag *Lag `json:"lag,omitempty"`

	// PG is the database's counters over the run (nil when Postgres is not involved).
	PG *measure.DBStats `json:"pg,omitempty"`

	Backend string `json:"backend,omitempty"`
	Note    string `json:"note,omitempty"`
	// Conditions records how the machine behaved around the run: waits for quiet, re-runs,
	// load from processes outside the benchmark.
	Conditions string `json:"conditions,omitempty"`
	Skip       string `json:"skip,omitempty"` // non-empty: the scenario is n/a for this system, and why
	Err        string `json:"err,omitempty"`  // non-empty: the run failed; no figure is reported
}

// OtherCPU is the machine's busy share not accounted for by the driving process or Postgres:
// the kernel's work on the workload's behalf (softirq for loopback traffic, block I/O workers)
// plus ForeignCPU. Negative when unknown.
func (s Sample) OtherCPU() float64 {
	if s.PostgresCPU < 0 {
		return -1
	}
	return max(0, s.MachineCPU-s.LoadCPU-s.PostgresCPU)
}

// OK reports whether the sample carries a figure.
func (s Sample) OK() bool { return s.Err == "" && s.Skip == "" && s.Units > 0 }

// Lag summarises fired − due over the timers of one run, in milliseconds.
type Lag struct {
	N    int     `json:"n"`
	Min  float64 `json:"min_ms"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P95  float64 `json:"p95_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
	// Spacing is the time between consecutive due times, Window their span.
	SpacingMs float64 `json:"spacing_ms"`
	WindowS   float64 `json:"window_s"`
	// ArmS is how long the runs took from the first enqueue until all slept; SlackMs the least
	// time left between a sleep being recorded and its due time; LeadS the time allowed.
	ArmS    float64 `json:"arm_s"`
	SlackMs float64 `json:"slack_ms"`
	LeadS   float64 `json:"lead_s"`
	// Tenths is the p99 of each tenth of the window, first due times first (timers only): a
	// lag that grows tenth by tenth is a backlog, one tenth far above the rest a burst.
	Tenths []float64 `json:"p99_by_tenth_ms,omitempty"`
}

// ByTenth is the nearest-rank p99 of each tenth of lags, which are in due order; nil for fewer
// than ten.
func ByTenth(lags []time.Duration) []float64 {
	if len(lags) < 10 {
		return nil
	}
	out := make([]float64, 10)
	for i := range out {
		out[i] = Summarize(lags[i*len(lags)/10 : (i+1)*len(lags)/10]).P99
	}
	return out
}

// Summarize computes a Lag from raw lags (nearest-rank percentiles).
func Summarize(lags []time.Duration) *Lag {
	if len(lags) == 0 {
		return nil
	}
	v := slices.Clone(lags)
	slices.Sort(v)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(v)))) - 1
		return ms(v[max(0, min(i, len(v)-1))])
	}
	var sum time.Duration
	for _, d := range v {
		sum += d
	}
	return &Lag{N: len(v), Min: ms(v[0]), Mean: ms(sum / time.Duration(len(v))),
		P50: rank(0.50), P95: rank(0.95), P99: rank(0.99), P999: rank(0.999), Max: ms(v[len(v)-1])}
}
