package worker

import (
	"context"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/replay"
)

// hold starts tracking a claim for heartbeats.
func (w *Worker) hold(t frontend.Task, ex *replay.Execution) *held {
	h := &held{runID: t.RunID, queue: t.Queue, job: t.Job, fence: t.Fence, token: t.LeaseToken, ex: ex, lastLanded: w.clock.Now()}
	w.mu.Lock()
	w.leases[h.key()] = h
	// A lease below the protocol's floor is read as the floor: an engine answering a nanosecond
	// (a bug, or not our engine) would otherwise spin the heartbeat loop against it.
	lease := t.Lease
	if lease > 0 {
		lease = max(lease, frontend.MinLease)
	}
	changed := lease > 0 && lease != w.lease
	if changed {
		w.lease = lease
	}
	w.mu.Unlock()
	if changed {
		// The loop sleeps on an interval derived from the lease it knew; re-arm it.
		select {
		case w.hbKick <- struct{}{}:
		default:
		}
	}
	return h
}

// key identifies a claim: the same run can be claimed again by this worker after its lease
// lapsed, and the stale claim must still be found and declared lost.
func (h *held) key() heldKey { return heldKey{h.runID, h.fence} }

// heldKey names a claim in Worker.leases: a comparable struct, not a formatted string, so the
// lookups of every claim's start, end and record make no allocation.
type heldKey struct {
	runID string
	fence int64
}

// defaultLease is the window assumed until the engine names its lease with a claim.
const defaultLease = 30 * time.Second

// release stops tracking a claim. It happens BEFORE the claim's final record, so a renewal still
// in flight when the run finishes is not mistaken for a lost lease.
// It returns the last renewal that landed, from which the final record's window is measured.
func (w *Worker) release(h *held) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.leases[h.key()] == h {
		delete(w.leases, h.key())
	}
	return h.lastLanded
}

func (w *Worker) interval() (every, lease time.Duration) {
	w.mu.Lock()
	lease = w.lease
	w.mu.Unlock()
	if lease <= 0 {
		lease = defaultLease
	}
	every = w.cfg.HeartbeatInterval
	if every <= 0 {
		every = lease / 3
	}
	return every, lease
}

// heartbeatLoop renews every held lease in one call per interval. The call runs apart from the
// loss check, so a store that hangs is caught exactly like one that refuses: the window is
// measured from the last renewal that landed, on this process's clock.
func (w *Worker) heartbeatLoop() {
	defer w.background.Done()
	inflight := make(chan struct{}, 1)
	for {
		every, lease := w.interval()
		tick := time.NewTimer(every)
		select {
		case <-w.hbStop:
			tick.Stop()
			return
		case <-w.hbKick:
			tick.Stop()
			continue
		case <-tick.C:
		}
		w.checkLost(lease)
		select {
		case inflight <- struct{}{}:
			w.background.Add(1)
			go func() {
				defer w.background.Done()
				defer func() { <-inflight }()
				w.renew(every)
			}()
		default:
			// The previous renewal has not returned: the check above keeps counting.
		}
	}
}

func (w *Worker) renew(timeout time.Duration) {
	w.mu.Lock()
	batch := make([]*held, 0, len(w.leases))
	req := frontend.HeartbeatRequest{WorkerID: w.cfg.ID}
	for _, h := range w.leases {
		if !h.lost {
			batch = append(batch, h)
			l := frontend.Lease{RunID: h.runID, Fence: h.fence, Token: h.token}
			if n := w.limits[h.job]; n > 0 {
				l.Slot, l.Limit = frontend.SlotKey(h.job), n
			}
			req.Leases = append(req.Leases, l)
		}
	}
	w.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	// An engine that is restarting does not answer for a moment: try again within this
	// interval rather than wait a whole interval, so a short outage costs no renewal window.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := w.heartbeat(ctx, req)
	firstErr := err
	for backoff := resendFirst; err != nil && unreachable(err) && ctx.Err() == nil; backoff = min(backoff*2, resendCap) {
		if !sleepCtx(ctx, backoff) {
			break
		}
		resp, err = w.heartbeat(ctx, req)
	}
	if err == nil && len(resp.Codes) != len(batch) {
		err = jobs.Errorf(jobs.CodeInvariant, "heartbeat answered %d codes for %d leases", len(resp.Codes), len(batch))
	}
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, h := range batch {
		if w.leases[h.key()] != h {
			continue // finished while the renewal was on the wire: not a loss
		}
		if firstErr != nil {
			// Said even when a retry landed: a renewal failed while the window had room.
			w.log.Warn("jobs.heartbeat.failed", "run", h.runID, "queue", h.queue, "err", firstErr, "landed", err == nil)
		}
		if err != nil {
			continue
		}
		switch code := jobs.Code(resp.Codes[i]); code {
		case "":
			h.lastLanded = now
		case jobs.CodeAborted:
			w.log.Info("jobs.run.cancelled", "run", h.runID, "queue", h.queue)
			h.lost = true
			h.ex.Abort(jobs.Errorf(jobs.CodeAborted, "the run was cancelled"))
		case jobs.CodeJobSlotLost:
			// A different row on a different clock from the lease: the fleet cap may now be
			// exceeded, so this copy stops.
			h.lost = true
			w.log.Error("jobs.worker.slot-lost", "run", h.runID, "queue", h.queue)
			h.ex.Abort(jobs.Errorf(code, "the run's concurrency slot was lost"))
		default:
			if transient(code) {
				// The engine could not finish this lease's renewal (its store failed on the slot,
				// say): not a refusal. It is not counted as landed, and the next renewal tries
				// again; a whole lease without one landing is a loss (checkLost). Taken as a
				// refusal, one slow store write aborted a run whose lease was fine.
				w.log.Warn("jobs.heartbeat.failed", "run", h.runID, "queue", h.queue, "code", string(code))
				continue
			}
			w.lost(h, jobs.Errorf(code, "the engine refused the lease renewal"))
		}
	}
}

// checkLost declares lost every lease with no renewal landed for a whole window.
func (w *Worker) checkLost(lease time.Duration) {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.leases {
		if !h.lost && now.Sub(h.lastLanded) >= lease {
			w.lost(h, jobs.Errorf(jobs.CodeJobLeaseLost, "no lease renewal landed for %s", now.Sub(h.lastLanded).Round(time.Millisecond)))
		}
	}
}

// lost aborts a run whose lease is gone: the engine is free to hand it to another worker, so this
// one must stop writing. Called with w.mu held. A claim already lost is lost once: a renewal sent
// before checkLost declared the loss may be refused after it, and one loss is one count in
// job_leases_lost_total and one line, not two.
func (w *Worker) lost(h *held, cause *jobs.Error) {
	if h.lost {
		return
	}
	h.lost = true
	w.log.Error("jobs.lease.lost", "run", h.runID, "queue", h.queue, "err", cause)
	w.metrics.leasesLost.WithLabelValues(h.queue).Inc()
	h.ex.Abort(cause)
}

// heartbeat renews req's leases in requests of at most frontend.MaxHeartbeatLeases each (the
// engine refuses a longer one), answering their codes in req's order.
func (w *Worker) heartbeat(ctx context.Context, req frontend.HeartbeatRequest) (frontend.HeartbeatResponse, error) {
	if len(req.Leases) <= frontend.MaxHeartbeatLeases {
		return w.fe.Heartbeat(ctx, req)
	}
	var out frontend.HeartbeatResponse
	for from := 0; from < len(req.Leases); from += frontend.MaxHeartbeatLeases {
		part := req
		part.Leases = req.Leases[from:min(from+frontend.MaxHeartbeatLeases, len(req.Leases))]
		resp, err := w.fe.Heartbeat(ctx, part)
		if err != nil {
			return frontend.HeartbeatResponse{}, err
		}
		if len(resp.Codes) != len(part.Leases) {
			// Refused here, not handed up as the answer: the caller checks the count against the
			// whole renewal, which one part's miscounted answer may match, and its codes would
			// then land on other claims (TestAMiscountedPartOfASplitHeartbeatRenewsNothing).
			return frontend.HeartbeatResponse{}, jobs.Errorf(jobs.CodeInvariant,
				"heartbeat answered %d codes for %d leases", len(resp.Codes), len(part.Leases))
		}
		out.Codes = append(out.Codes, resp.Codes...)
	}
	return out, nil
}
