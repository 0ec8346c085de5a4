package report

import (
	"strings"

	"github.com/ultimat3/jobs/bench/internal/record"
	"github.com/ultimat3/jobs/bench/systems"
)

// Section 9: bulk enqueue against River's InsertMany; enqueue in the caller's transaction
// against a plain INSERT in the same transaction; the outbox relay.

// pgPerUnit is the commits, rows written and WAL bytes per unit of a group.
func pgPerUnit(g *group) string {
	return commitsCell(g, false) + " | " + num(g.med(perUnit(rows, false)), 2) + " | " + num(g.med(perUnit(walB, false)), 0)
}

func renderSection9(w func(string, ...any), samples []record.Sample, keys []string, in Info) {
	bulk, bulkOrder := groups(samples, systems.ScenarioBulk, nil)
	if len(bulkOrder) == 0 {
		if _, o := groups(samples, systems.ScenarioTxPlain, nil); len(o) == 0 {
			return
		}
	}
	w("## 9. Bulk enqueue, transactional enqueue, the outbox relay\n\n")
	w("**Bulk enqueue.** %d no-op jobs inserted in one call, one transaction, with no worker running: ours with `Job.EnqueueMany` (the Postgres store COPYs the runs straight into the runs table under a savepoint, falling back to a staging table and `INSERT … SELECT … ON CONFLICT DO NOTHING` only when an idempotency key is already held, and writes no RunStarted row: the run's row implies it, and a read of the history rebuilds it), River with `InsertMany` (COPY FROM). ", in.BulkJobs)
	w("The clock covers the call, from the inputs to the commit; each run then counts the rows in the table. Target: ours ≥ 1.0× River's rows/s. Per job we write the run row with its 6 index entries, 7 for a tenanted run (the oldest-first claim's index is built only for an engine that claims oldest-first).\n\n")
	if len(bulkOrder) > 0 {
		var riverRate float64
		for _, k := range bulkOrder {
			if g := bulk[k]; strings.HasPrefix(k, "river") && len(g.ok) > 0 {
				riverRate = g.med(rate)
			}
		}
		w("| system | backend | jobs | jobs/s | ÷ River | CPU (bench/pg/other) | commits/job | rows/job | WAL B/job |\n")
		w("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, k := range bulkOrder {
			g := bulk[k]
			name := g.label
			if systems.IsOurs(k) {
				name = "**" + name + "**"
			}
			if len(g.ok) == 0 {
				failedRow(w, name, g, 9)
				continue
			}
			w("| %s | %s | %d | %s | %s | %s | %s |\n", name, g.backend, g.ok[0].N, rateCell(g), ratio(g.med(rate), riverRate), cpuCell(g), pgPerUnit(g))
		}
		w("\n")
	}

	type row struct{ scen, what string }
	txRows := []row{
		{systems.ScenarioTxPlain, "a plain one-row INSERT (the baseline)"},
		{systems.ScenarioTxEnqueue, "`EnqueueTx` with `outbox.SameDB`: the run itself, in the caller's transaction"},
		{systems.ScenarioTxStage, "`EnqueueTx` with `outbox.Outbox`: an outbox row staged"},
	}
	var plainRate float64
	any := false
	for _, r := range txRows {
		if m, o := ourGroups(samples, keys, r.scen, nil); len(o) > 0 {
			any = true
			if r.scen == systems.ScenarioTxPlain && len(m[o[0]].ok) > 0 {
				plainRate = m[o[0]].med(rate)
			}
		}
	}
	if any {
		w("**Enqueue in the caller's transaction.** %d transactions from %d concurrent callers on a pool of their own; each writes one application row (`INSERT INTO app_orders`) and then one of the rows below, and commits. No worker runs. Latency is the mean commit-to-commit time of one caller (callers ÷ transactions per second); \"added\" is the difference from the plain INSERT's.\n\n", in.TxCount, in.Concurrency)
		w("| besides the application row, the transaction writes | tx/s | ÷ plain | latency (ms) | added (ms) | CPU (bench/pg/other) | commits/tx | rows/tx | WAL B/tx |\n")
		w("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		lat := func(r float64) float64 { return float64(in.Concurrency) / r * 1000 }
		for _, r := range txRows {
			m, o := ourGroups(samples, keys, r.scen, nil)
			if len(o) == 0 {
				continue
			}
			g := m[o[0]]
			if len(g.ok) == 0 {
				failedRow(w, r.what, g, 9)
				continue
			}
			added := "—"
			if plainRate > 0 && r.scen != systems.ScenarioTxPlain {
				added = num(lat(g.med(rate))-lat(plainRate), 2)
			}
			w("| %s | %s | %s | %s | %s | %s | %s |\n", r.what, rateCell(g), ratio(g.med(rate), plainRate),
				num(lat(g.med(rate)), 2), added, cpuCell(g), pgPerUnit(g))
		}
		w("\n")
	}

	if m, o := ourGroups(samples, keys, systems.ScenarioRelay, nil); len(o) > 0 {
		w("**The relay.** %d outbox rows are staged and committed before the window (on a pool closed before it opens); one relay (`Relay.Pass` in a loop, batches of 100, publishing to an in-process engine) then drains them: claim a batch, publish each row in order (each an enqueue carrying the row's dedupe id), mark the batch published. The clock stops when every row is published; the run then counts the runs.\n\n", in.RelayRows)
		w("| system | backend | rows | published rows/s | CPU (bench/pg/other) | commits/row | rows written/row | WAL B/row |\n")
		w("|---|---|---:|---:|---:|---:|---:|---:|\n")
		for _, k := range o {
			g := m[k]
			name := "**" + g.label + "**"
			if len(g.ok) == 0 {
				failedRow(w, name, g, 8)
				continue
			}
			w("| %s | %s | %d | %s | %s | %s |\n", name, g.backend, g.ok[0].N, rateCell(g), cpuCell(g), pgPerUnit(g))
		}
		w("\n")
	}
}
