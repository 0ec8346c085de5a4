package main

import (
	"context"

	"github.com/ultimat3/jobs/bench/systems"
)

// section9 runs the bulk insert on every system that has one (ours, River), then the
// transactional-enqueue scenarios and the relay on ours.
func (h *harness) section9(ctx context.Context, keys []string) {
	var bulk, tx []string
	for _, k := range keys {
		f, _ := systems.Lookup(k)
		sys := f()
		if _, ok := sys.(systems.BulkInserter); ok {
			bulk = append(bulk, k)
		}
		if _, ok := sys.(systems.TxEnqueuer); ok {
			tx = append(tx, k)
		}
	}
	if len(bulk) > 0 && h.cfg.runs(systems.ScenarioBulk) {
		h.scenario(ctx, systems.ScenarioBulk, h.cfg.BulkJobs, bulk)
	}
	if len(tx) == 0 {
		return
	}
	for _, scen := range []string{systems.ScenarioTxPlain, systems.ScenarioTxEnqueue, systems.ScenarioTxStage} {
		if h.cfg.runs(scen) {
			h.scenario(ctx, scen, h.cfg.TxCount, tx)
		}
	}
	if h.cfg.runs(systems.ScenarioRelay) {
		h.scenario(ctx, systems.ScenarioRelay, h.cfg.RelayRows, tx)
	}
}

// counted reports whether a scenario with an untimed preparation keeps its Postgres counters:
// section 9's preparations write nothing through the pools the timed part uses (the relay's
// backlog is staged on a pool closed before the window), so the counters are the timed work's.
func counted(scenario string) bool {
	switch scenario {
	case systems.ScenarioBulk, systems.ScenarioTxPlain, systems.ScenarioTxEnqueue, systems.ScenarioTxStage,
		systems.ScenarioRelay:
		return true
	case systems.ScenarioDrain32, systems.ScenarioDrain100:
		// The backlog is loaded on a pool whose backends have exited before the baseline.
		return true
	}
	return false
}

// prepareSection9 does the untimed part of a section 9 scenario and returns its timed part.
func prepareSection9(ctx context.Context, sys systems.System, spec childSpec) (systems.Measure, error) {
	if spec.Scenario == systems.ScenarioBulk {
		b, ok := sys.(systems.BulkInserter)
		if !ok {
			return nil, systems.Unsupported("no bulk insert")
		}
		return b.BulkInsert(ctx, spec.N)
	}
	t, ok := sys.(systems.TxEnqueuer)
	if !ok {
		return nil, systems.Unsupported("measured for our engine only")
	}
	if spec.Scenario == systems.ScenarioRelay {
		return t.Relay(ctx, spec.N)
	}
	return t.TxEnqueue(ctx, spec.Scenario, spec.N, spec.Concurrency)
}
