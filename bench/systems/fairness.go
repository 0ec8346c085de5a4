package systems

import "context"

// Scenario 9 (ours only): fair claiming across tenants. Tenant A enqueues a backlog, then tenant
// B enqueues a few runs; B's wait (enqueue → body start) is measured against the same runs in an
// empty queue, and the throughput of draining everything against plain oldest-first claiming.
const (
	ScenarioFairness       = "fairness"        // n runs of A's backlog, then B's; fair claiming
	ScenarioFairnessOldest = "fairness-oldest" // the same with oldest-first claiming
	ScenarioFairnessEmpty  = "fairness-empty"  // B's runs alone, in an empty queue
)

// FairnessNewcomers is how many runs tenant B enqueues.
const FairnessNewcomers = 100

// FairnessSpec is one fairness measurement.
type FairnessSpec struct {
	// Backlog is how many runs tenant A enqueues first (untimed); 0 for the empty queue.
	Backlog int
	// OldestFirst claims in plain oldest-ready order instead of rotating across tenants.
	OldestFirst bool
	// Concurrency is the worker's concurrency.
	Concurrency int
}

// FairnessMeasurer is implemented by systems that claim fairly across tenants (our engine). The
// preparation enqueues A's backlog with no worker running; the Measure starts the worker,
// enqueues B's runs at once and returns when every run has completed, with B's waits in
// Result.Lags and every run in Result.Units.
type FairnessMeasurer interface {
	Fairness(ctx context.Context, spec FairnessSpec) (Measure, error)
}
