package worker

import (
	"context"
	"time"

	"github.com/ultimat3/jobs/frontend"
)

// The worker's session (frontend.Sessions): announced before the first poll, attended while the
// worker runs, ended after the drain. The engine uses it to hand back at once what this worker
// held when it is gone: at a clean stop, at a restart under the same id, or when the attended
// connection drops because the process died.

// attendWait is how long one Attend holds; the engine caps it at its own long-poll bound.
const attendWait = 30 * time.Second

// begin announces the worker; the pollers wait for it, so a claim made under this id is never
// released by this worker's own start. An engine that cannot be reached is asked again; one that
// refuses (an engine without sessions) does not keep the worker from working.
func (w *Worker) begin() {
	defer close(w.begun)
	s := frontend.Session{WorkerID: w.cfg.ID}
	backoff := resendFirst
	for w.pollCtx.Err() == nil {
		ctx, cancel := context.WithTimeout(w.pollCtx, 10*time.Second)
		err := w.fe.WorkerStart(ctx, s)
		cancel()
		if err == nil {
			return
		}
		if !unreachable(err) {
			w.log.Warn("jobs.worker.start-refused", "err", err)
			return
		}
		w.log.Warn("jobs.worker.start-failed", "err", err)
		if !sleepCtx(w.pollCtx, backoff) {
			return
		}
		backoff = min(backoff*2, resendCap)
	}
}

// attend keeps the session open until ctx ends.
func (w *Worker) attend(ctx context.Context) {
	defer close(w.attended)
	// After the start: the engine refuses a start under an id whose session is live, and this
	// session would be.
	select {
	case <-w.begun:
	case <-ctx.Done():
		return
	}
	s := frontend.Session{WorkerID: w.cfg.ID, Wait: attendWait}
	backoff := resendFirst
	for ctx.Err() == nil {
		if err := w.fe.Attend(ctx, s); err != nil {
			if ctx.Err() != nil {
				return
			}
			if !unreachable(err) {
				// An engine without sessions: nothing to attend; leases still bound a death.
				w.log.Info("jobs.worker.session-unsupported", "err", err)
				return
			}
			if !sleepCtx(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, resendCap)
			continue
		}
		backoff = resendFirst
	}
}

// end stops attending and tells the engine the worker stopped, releasing what it still holds
// (claims that outlived the drain, sticky reservations of the runs it had parked).
func (w *Worker) end() {
	w.stopAttend()
	<-w.attended
	<-w.begun
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.fe.WorkerStop(ctx, frontend.Session{WorkerID: w.cfg.ID}); err != nil {
		w.log.Warn("jobs.worker.stop-unannounced", "err", err)
	}
}
