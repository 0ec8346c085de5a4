package report

import (
	"strings"

	"github.com/ultimat3/jobs/bench/internal/record"
	"github.com/ultimat3/jobs/bench/systems"
)

// renderDrain prints section 12: a committed backlog drained by 32 and by 100 workers, ours
// against River tuned, with the cost per job beside each figure.
func renderDrain(w func(string, ...any), samples []record.Sample, keys []string, in Info) {
	any := false
	for _, d := range systems.DrainScenarios {
		if _, o := groups(samples, d.Scenario, nil); len(o) > 0 {
			any = true
		}
	}
	if !any {
		return
	}
	w("## 12. Backlog drain\n\n")
	w("River's own benchmark shape. Untimed: %d no-op jobs are inserted in one bulk call (ours `Job.EnqueueMany`, River `InsertMany`) on a pool of their own, the tables are ANALYZEd, and that pool's backends have exited (their statistics flushed) before the baseline is taken. ", in.DrainJobs)
	w("Timed: the workers start (ours: engine and worker in-process, on Postgres and on embedded SQLite, `Concurrency` = the worker count; River: `MaxWorkers` = the worker count, tuned fetch settings) and the clock stops when every job is completed: ours counted from acknowledged completions, River from its completion events; each run then checks the count in the store (ours: completed runs in the queue statistics; River: completed rows of `river_job`). ")
	w("Our runs keep their full history as in every other section (each run's RunStarted and RunCompleted; on Postgres both are read back from the run's row, which implies them, rather than written twice: docs/architecture.md); River keeps a row per job. Target: ours ≥ 1.0× River tuned at both worker counts.\n\n")
	w("| system | backend | workers | jobs | jobs/s | ÷ River | CPU (bench/pg/other) | commits/job | rows/job | WAL B/job |\n")
	w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, d := range systems.DrainScenarios {
		m, order := groups(samples, d.Scenario, nil)
		var riverRate float64
		for _, k := range order {
			if g := m[k]; strings.HasPrefix(k, "river") && len(g.ok) > 0 {
				riverRate = g.med(rate)
			}
		}
		for _, k := range order {
			g := m[k]
			name := g.label
			if systems.IsOurs(k) {
				name = "**" + name + "**"
			}
			if len(g.ok) == 0 {
				failedRow(w, name, g, 10)
				continue
			}
			per := pgPerUnit(g)
			if g.ok[0].PG == nil {
				per = "— | — | — (no Postgres)"
			}
			w("| %s | %s | %d | %d | %s | %s | %s | %s |\n", name, g.backend, d.Workers, g.ok[0].N, rateCell(g),
				ratio(g.med(rate), riverRate), cpuCell(g), per)
		}
	}
	w("\n")
}
