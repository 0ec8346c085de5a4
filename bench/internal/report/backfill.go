package report

import (
	"github.com/ultimat3/jobs/bench/internal/record"
	"github.com/ultimat3/jobs/bench/systems"
)

// Section 8 measures our engine's backfills alone: the pass, by default and with
// OverlapCheckpoints, against the loop a person would write by hand over the same table, and the
// resume of a long pass.

// backfillResumeTarget is the resume time we aim for, in milliseconds.
const backfillResumeTarget = 1000.0

func renderBackfills(w func(string, ...any), samples []record.Sample, keys []string, in Info) {
	w("## 8. Backfills\n\n")
	pass, passOrder := ourGroups(samples, keys, systems.ScenarioBackfill, nil)
	overlap, overlapOrder := ourGroups(samples, keys, systems.ScenarioBackfillOverlap, nil)
	loop, _ := ourGroups(samples, keys, systems.ScenarioBackfillLoop, nil)
	w("**Throughput.** A Postgres table of %d rows (`id bigint PRIMARY KEY, payload text, swept boolean`) is swept three times, from a fresh table each time: ", in.BackfillRows)
	w("by a backfill pass (`keyset.Pgx` source, pages of 1,000, `Rate(1e6)`: far above what the pages achieve, so the throttle never waits) on one worker in the bench process, started before the clock (a worker is up when someone enqueues a pass; the clock covers the enqueue, the claim, every page and the completion); by the same pass with `OverlapCheckpoints()` (opt-in: a page's handler starts while the previous page's checkpoint commits, so a crash may handle two pages again instead of one); and by a hand-written loop that makes the same two statements a page (`SELECT id … WHERE id > $1 ORDER BY id LIMIT 1000`, then `UPDATE … WHERE id = ANY($1)`). ")
	w("The pass also records one step per page and reports its progress to the ledger. Each system's first row is the default pass, the row marked `OverlapCheckpoints()` the pass with that option; both are divided by the same loop. The target is the default pass at ≥ 0.9× the loop's rows/s. Each run checks every row was swept.\n\n")
	order := passOrder
	for _, k := range overlapOrder {
		if pass[k] == nil {
			order = append(order, k)
		}
	}
	if len(order) == 0 {
		notRun(w, in, keys)
	} else {
		w("| system | backend | rows | pass (rows/s) | loop (rows/s) | pass ÷ loop | CPU of the pass (bench/pg/other) |\n")
		w("|---|---|---:|---:|---:|---:|---:|\n")
		for _, k := range order {
			lr := "—"
			lrate := 0.0
			if l := loop[k]; l != nil && len(l.ok) > 0 {
				lr, lrate = rateCell(l), l.med(rate)
			}
			if g := pass[k]; g != nil {
				passRow(w, "**"+g.label+"**", g, lr, lrate)
			}
			if g := overlap[k]; g != nil {
				passRow(w, "**"+g.label+"**, `OverlapCheckpoints()`", g, lr, lrate)
			}
		}
		w("\n")
	}

	m, order := ourGroups(samples, keys, systems.ScenarioBackfillResume, nil)
	w("**Resume.** A pass whose history holds %d completed pages (`batch:0` … each with its checkpoint) is written through the store API outside the timed window and left ready, as after a crash whose lease lapsed. ", in.BackfillPages)
	w("The clock starts a fresh worker and stops when the pass's completion is acknowledged: the claim, the history read, the replay of every page (no statement, no pause), the one empty page that ends it, the ledger row and the completion commit. The target is < %.0f ms on Postgres.\n\n", backfillResumeTarget)
	if len(order) == 0 {
		notRun(w, in, keys)
		return
	}
	w("| system | backend | pages | resume (ms) | pages/s | reading history (ms) | CPU (bench/pg/other) |\n")
	w("|---|---|---:|---:|---:|---:|---:|\n")
	for _, k := range order {
		g := m[k]
		name := "**" + g.label + "**"
		if len(g.ok) == 0 {
			failedRow(w, name, g, 7)
			continue
		}
		w("| %s | %s | %d | %s | %s | %s | %s |\n", name, g.backend, g.ok[0].N, spreadCell(g, wallMs, 0),
			num(g.med(rate), 0), num(g.med(readMs), 0), cpuCell(g))
	}
	w("\n")
}

// passRow prints one pass of a system beside that system's loop (its rate cell and median).
func passRow(w func(string, ...any), name string, g *group, loopCell string, loopRate float64) {
	if len(g.ok) == 0 {
		failedRow(w, name, g, 7)
		return
	}
	w("| %s | %s | %d | %s | %s | %s | %s |\n", name, g.backend, g.ok[0].N, rateCell(g), loopCell, ratio(g.med(rate), loopRate), cpuCell(g))
}
