package main

import (
	"context"

	"github.com/ultimat3/jobs/bench/systems"
)

// fairness runs scenario 10 on each of our systems: the backlog with fair claiming, the same with
// oldest-first claiming, and tenant B's runs alone in an empty queue. BENCH_SCENARIOS=fairness
// runs all three.
func (h *harness) fairness(ctx context.Context, keys []string) {
	if !h.cfg.runs(systems.ScenarioFairness) {
		return
	}
	var ours []string
	for _, k := range keys {
		f, _ := systems.Lookup(k)
		if _, ok := f().(systems.FairnessMeasurer); ok {
			ours = append(ours, k)
		}
	}
	if len(ours) == 0 {
		return
	}
	// n is every run of the scenario: A's backlog and B's newcomers.
	all := h.cfg.FairBacklog + systems.FairnessNewcomers
	h.scenario(ctx, systems.ScenarioFairnessEmpty, systems.FairnessNewcomers, ours)
	// Fair and oldest-first are read as a ratio: their runs alternate.
	h.interleaved(ctx, []string{systems.ScenarioFairness, systems.ScenarioFairnessOldest}, all, h.cfg.Concurrency, ours)
}
