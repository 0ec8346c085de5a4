package main

import (
	"context"

	"github.com/ultimat3/jobs/bench/systems"
)

// backfills runs section 8 on our systems that implement it: the pass, the pass with
// OverlapCheckpoints and the hand-written loop over the same table, then the resume of a long pass.
func (h *harness) backfills(ctx context.Context, keys []string) {
	var ours []string
	for _, k := range keys {
		f, _ := systems.Lookup(k)
		if _, ok := f().(systems.Backfiller); ok {
			ours = append(ours, k)
		}
	}
	if len(ours) == 0 {
		return
	}
	for _, scen := range []string{systems.ScenarioBackfill, systems.ScenarioBackfillOverlap, systems.ScenarioBackfillLoop} {
		if h.cfg.runs(scen) {
			h.scenario(ctx, scen, h.cfg.BackfillRows, ours)
		}
	}
	if h.cfg.runs(systems.ScenarioBackfillResume) {
		h.scenario(ctx, systems.ScenarioBackfillResume, h.cfg.BackfillPages, ours)
	}
}
