package report

import (
	"fmt"
	"math"

	"github.com/ultimat3/jobs/bench/internal/record"
	"github.com/ultimat3/jobs/bench/systems"
)

// fairCost is the most throughput fair claiming may cost against oldest-first, in percent.
const fairCost = 10.0

// renderFairness prints scenario 10: tenant B's wait behind tenant A's backlog, fair against
// oldest-first claiming and against an empty queue, and what fairness costs in throughput.
func renderFairness(w func(string, ...any), samples []record.Sample, keys []string, in Info) {
	w("## 10. Fair claiming across tenants\n\n")
	empty, order := ourGroups(samples, keys, systems.ScenarioFairnessEmpty, nil)
	fair, _ := ourGroups(samples, keys, systems.ScenarioFairness, nil)
	oldest, _ := ourGroups(samples, keys, systems.ScenarioFairnessOldest, nil)
	if len(order) == 0 {
		w("Whether one tenant's backlog delays another tenant's new runs. ")
		notRun(w, in, keys)
		return
	}
	w("Tenant A enqueues %d no-op runs into one queue with no worker running; then a worker starts (%d in flight) and tenant B enqueues %d runs at once. ",
		in.FairBacklog, in.Concurrency, systems.FairnessNewcomers)
	w("B's wait is enqueue → body start, nearest-rank over its %d runs; \"empty\" is B's %d runs alone in an empty queue. ",
		systems.FairnessNewcomers, systems.FairnessNewcomers)
	w("Throughput is every run (A's and B's) completed over the timed window, fair claiming against plain oldest-first claiming (`engine.Config.OldestFirst`), their runs alternating (fair, oldest-first, fair, …) so that the machine's drift falls on both alike; the target is a cost of at most %.0f%%.\n\n", fairCost)
	w("| system | backend | claiming | B wait p50 (ms) | B wait p99 (ms) | runs/s | CPU (bench/pg/other) |\n")
	w("|---|---|---|---:|---:|---:|---:|\n")
	lag := func(pick func(*record.Lag) float64) func(record.Sample) float64 {
		return func(s record.Sample) float64 {
			if s.Lag == nil {
				return math.NaN()
			}
			return pick(s.Lag)
		}
	}
	p50 := lag(func(l *record.Lag) float64 { return l.P50 })
	p99 := lag(func(l *record.Lag) float64 { return l.P99 })
	var costs []string // printed under the table, which they would otherwise split
	for _, k := range order {
		for _, row := range []struct {
			name string
			g    *group
		}{{"empty queue", empty[k]}, {"fair", fair[k]}, {"oldest-first", oldest[k]}} {
			g := row.g
			if g == nil {
				continue
			}
			name := "**" + g.label + "**"
			if len(g.ok) == 0 {
				failedRow(w, name, g, 7)
				continue
			}
			w("| %s | %s | %s | %s | %s | %s | %s |\n", name, g.backend, row.name,
				num(g.med(p50), 1), spreadCell(g, p99, 1), rateCell(g), cpuCell(g))
		}
		if f, o := fair[k], oldest[k]; f != nil && o != nil && len(f.ok) > 0 && len(o.ok) > 0 {
			rate := func(s record.Sample) float64 { return s.Rate }
			cost := 100 * (1 - f.med(rate)/o.med(rate))
			meets := "met"
			if cost > fairCost {
				meets = "**not met**"
			}
			costs = append(costs, fmt.Sprintf("%s: fair claiming costs %s%% of oldest-first throughput (target ≤ %.0f%%: %s).",
				fair[k].label, num(cost, 1), fairCost, meets))
		}
	}
	w("\n")
	for _, c := range costs {
		w("%s\n\n", c)
	}
}
