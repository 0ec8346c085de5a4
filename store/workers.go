package store

import (
	"context"
	"time"
)

// Workers ends a worker's hold on runs at once, when the engine knows the worker is gone (it
// stopped cleanly, it started again under the same id, or its session's connection dropped)
// rather than waiting for its leases to lapse.
type Workers interface {
	// WorkerRelease ends everything workerID holds, in one transaction:
	//   - its running runs (any fence) become ready now, WorkerID and the lease cleared, without
	//     spending an attempt, exactly as a lapsed lease does; the old holder's late writes are
	//     refused because the run is no longer running;
	//   - its sticky reservations end: a suspended or ready run whose WorkerID is workerID keeps
	//     its state and loses the WorkerID, so a wake-up (or a woken run already waiting out the
	//     sticky window) is claimable by any worker at once.
	// It returns the runs that became claimable (released claims, marked Reclaimed, and sticky
	// ready runs). A
	// worker that holds nothing changes nothing. An empty workerID is refused (X_BAD_REQUEST).
	WorkerRelease(ctx context.Context, workerID string, now time.Time) ([]Woken, error)
}
