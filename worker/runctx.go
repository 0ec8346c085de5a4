package worker

import (
	"context"

	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
)

// runContext is the context a run's body executes under: the app's BaseContext, plus the
// worker's clock (so code that waits, a backfill's throttle, waits on the clock a test drives)
// and the run's ledger, bound to whatever claim this worker holds on the run when it is used.
func (w *Worker) runContext(t frontend.Task) context.Context {
	ctx := w.clockCtx
	if ctx == nil {
		ctx = clock.NewContext(w.cfg.BaseContext(), w.clock)
	}
	if fe, ok := w.fe.(frontend.Backfills); ok {
		ctx = frontend.WithLedger(ctx, &frontend.ClaimedLedger{FE: fe, Claim: func() frontend.Claim { return w.claimOf(t.RunID, t.Fence) }})
	}
	return ctx
}

// claimOf returns this worker's newest claim on a run: the highest fence it holds, and at least
// the fence of the claim the execution started under (the body may call before the claim is
// tracked).
func (w *Worker) claimOf(runID string, started int64) frontend.Claim {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := frontend.Claim{RunID: runID, WorkerID: w.cfg.ID, Fence: started}
	for _, h := range w.leases {
		if h.runID == runID && h.fence > c.Fence {
			c.Fence = h.fence
		}
	}
	return c
}
