// Package record defines one measured run as the harness stores it (results.json) and the
// report reads it.
package record

import "github.com/ultimat3/jobs/bench/internal/measure"

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
