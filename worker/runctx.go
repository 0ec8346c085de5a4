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
		ctx = frontend.WithLedger(ctx, &frontend.ClaimedLedger{FE: fe, Claim: func() frontend.Claim { return w.claimOf(t) }})
	}
	return ctx
}

// claimOf returns this worker's newest claim on a run: the highest fence it holds (with that
// claim's lease token), and at least the claim the execution started under, t (the body may call
// before the claim is tracked).
func (w *Worker) claimOf(t frontend.Task) frontend.Claim {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := frontend.Claim{RunID: t.RunID, WorkerID: w.cfg.ID, Fence: t.Fence, LeaseToken: t.LeaseToken}
	for _, h := range w.leases {
		if h.runID == t.RunID && h.fence > c.Fence {
			c.Fence, c.LeaseToken = h.fence, h.token
		}
	}
	return c
}
