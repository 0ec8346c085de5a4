package main

import (
	"context"

	"github.com/ultimat3/jobs/bench/systems"
)

// scenarioDrain is the name BENCH_SCENARIOS takes for section 12; it runs every drain scenario.
const scenarioDrain = "drain"

// drain runs section 12 on every system with a backlog drain (ours, River): BENCH_DRAIN_JOBS
// jobs, at each worker count.
func (h *harness) drain(ctx context.Context, keys []string) {
	if !h.cfg.runs(scenarioDrain) {
		return
	}
	var with []string
	for _, k := range keys {
		f, _ := systems.Lookup(k)
		if _, ok := f().(systems.Drainer); ok {
			with = append(with, k)
		}
	}
	if len(with) == 0 {
		return
	}
	for _, d := range systems.DrainScenarios {
		h.interleaved(ctx, []string{d.Scenario}, h.cfg.DrainJobs, d.Workers, with)
	}
}

// prepareDrain does the untimed part of a drain (the backlog inserted and committed) and returns
// its timed part.
func prepareDrain(ctx context.Context, sys systems.System, spec childSpec) (systems.Measure, error) {
	d, ok := sys.(systems.Drainer)
	if !ok {
		return nil, systems.Unsupported("no backlog drain")
	}
	return d.Drain(ctx, spec.N, systems.DrainWorkers(spec.Scenario))
}
