package worker

import (
	"context"
	"errors"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
)

// An engine that cannot be reached (a deploy, a crash and restart, a store failover) is not the
// job's failure. Every send of a claim (a step, a suspension, the final complete/fail/block)
// holds its commands and sends them again, marked Retry so the engine settles an unknown commit
// from the history instead of appending twice, until one of:
//   - the engine answers (landed, or a real refusal: a stale fence, a cancel, a bad request);
//   - the claim's lease is truly gone: no renewal landed for a whole lease, measured on this
//     worker's clock exactly as the heartbeat's loss check does. The run is then dropped without
//     recording anything: the engine's lease expiry hands it back without spending an attempt;
//   - the attempt was aborted (its deadline passed, or the heartbeat learned of a cancel).
//
// The resends back off exponentially from resendFirst to resendCap, so an engine coming back
// from a restart sees each waiting worker again within about a second.
const (
	resendFirst = 50 * time.Millisecond
	resendCap   = time.Second
)

// send sends cmds, resending while the engine is unreachable and the claim still holds. final
// marks the claim's last record (sent after the heartbeats stopped tracking it), bounded by the
// lease measured from the last renewal that landed and not by the execution's abort: a timed-out
// attempt's failure is exactly what that record says.
func (r *recorder) send(ctx context.Context, cmds []frontend.Command, final bool) (frontend.RecordResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	req := frontend.RecordRequest{RunID: r.runID, Fence: r.fence, WorkerID: r.worker, LeaseToken: r.token, AfterSeq: r.seq, Slot: r.slot, Commands: cmds}
	backoff := resendFirst
	for try := 1; ; try++ {
		resp, err := r.fe.Record(ctx, req)
		if err == nil {
			r.seq = resp.LastSeq
			if try > 1 {
				r.w.log.Info("jobs.record.landed", "run", r.runID, "tries", try)
			}
			return resp, nil
		}
		if !unreachable(err) || ctx.Err() != nil {
			return resp, err
		}
		if stop := r.holds(final); stop != nil {
			r.w.log.Warn("jobs.record.abandoned", "run", r.runID, "tries", try, "err", err, "why", stop)
			if final && stop.Code == jobs.CodeJobLeaseLost {
				// No longer tracked by the heartbeat's loss check, so said here: the engine
				// will hand the run to another worker, and this claim's outcome is lost.
				r.w.log.Error("jobs.lease.lost", "run", r.runID, "queue", r.queue, "err", stop)
				r.w.metrics.leasesLost.WithLabelValues(r.queue).Inc()
			}
			return resp, stop
		}
		if try == 1 {
			r.w.log.Warn("jobs.record.resending", "run", r.runID, "err", err)
		}
		req.Retry = true
		if !r.w.pause(ctx, backoff) {
			return resp, err
		}
		backoff = min(backoff*2, resendCap)
	}
}

// holds returns nil while the claim may still be written, else why not (X_JOB_LEASE_LOST or the
// abort's cause).
func (r *recorder) holds(final bool) *jobs.Error {
	w := r.w
	select {
	case <-w.hbStop:
		// The worker stopped: its session's end released what it held.
		return jobs.Errorf(jobs.CodeAborted, "the worker stopped while the engine was unreachable")
	default:
	}
	now := w.clock.Now()
	w.mu.Lock()
	lease := w.lease
	var last time.Time
	lost := false
	if final {
		last = r.landed
	} else if ex := r.ex.Load(); ex != nil {
		if h := w.leases[heldKey{r.runID, r.fence}]; h != nil {
			last, lost = h.lastLanded, h.lost
		} else {
			last = r.claimedAt
		}
	} else {
		last = r.claimedAt
	}
	w.mu.Unlock()
	if !final {
		if ex := r.ex.Load(); ex != nil {
			if cause := ex.Aborted(); cause != nil {
				return cause
			}
		}
	}
	if lease <= 0 {
		lease = defaultLease
	}
	if last.IsZero() {
		last = r.claimedAt
	}
	if lost || now.Sub(last) >= lease {
		return jobs.Errorf(jobs.CodeJobLeaseLost, "the engine was unreachable and no lease renewal landed for %s", now.Sub(last).Round(time.Millisecond))
	}
	return nil
}

// unreachable reports whether err means the engine (or its store) did not answer: the send may be
// repeated. A refusal (a stale fence, a cancel, a bad request: any X_ code of a rule) is not.
func unreachable(err error) bool {
	if c := jobs.CodeOf(err); c != "" {
		return transient(c)
	}
	// A transport error the client did not wrap (an in-process engine never returns one).
	return !errors.Is(err, context.Canceled)
}

// transient reports whether a code says the engine could not finish a call, not that it refused
// it: the call is tried again.
func transient(c jobs.Code) bool {
	switch c {
	case jobs.CodeCommitUnknown, jobs.CodeStoreUnavailable, jobs.CodeEngineUnreachable, jobs.CodeDraining, jobs.CodeInternal:
		return true
	}
	return false
}

// pause waits d between resends; it reports false when ctx ended or the worker stopped first.
func (w *Worker) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-w.hbStop:
		return false
	}
}

// sleepCtx waits d, or less when ctx ends; it reports whether the whole d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// history reads the claim's run's events after afterSeq, reading again while the engine is
// unreachable and the claim holds (a claim that lapses unread spends no attempt, but waits out
// its lease).
func (r *recorder) history(ctx context.Context, afterSeq int64) ([]history.Event, error) {
	backoff := resendFirst
	for {
		evs, err := r.fe.History(ctx, r.runID, afterSeq)
		if err == nil || !unreachable(err) || ctx.Err() != nil {
			return evs, err
		}
		if stop := r.holds(false); stop != nil {
			return nil, stop
		}
		if !r.w.pause(ctx, backoff) {
			return nil, err
		}
		backoff = min(backoff*2, resendCap)
	}
}
