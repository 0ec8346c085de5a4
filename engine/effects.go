package engine

import (
	"context"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/signals"
	"github.com/ultimat3/jobs/store"
)

// callID is the id of the effect of durable call name of run runID: the published event's id,
// or the enqueued run's dedupe id. Being a function of the call, a call done again (its record
// was lost with a lease or a failed store) names the same effect, and the stores make that a
// no-op: RunPublish ignores a kept event id, RunCreateOnce returns the run made under the id.
func callID(runID, name string) string { return "call:" + runID + "/" + name }

// effects carries out the record's publishes and enqueues before the record is committed, and
// returns the record with their outcomes in each command's Effect. Effects cannot share the
// record's transaction (the group commit batches many runs' records), so they are made
// idempotent instead: see callID. Only the claim's holder may act for the run.
func (e *Engine) effects(ctx context.Context, req frontend.RecordRequest) (frontend.RecordRequest, error) {
	checked := false
	// fresh: nothing was carried out since the run was last read running at the record's
	// fence (holds, or an enqueue's re-read).
	fresh := false
	for i, c := range req.Commands {
		if c.Kind != frontend.CmdPublish && c.Kind != frontend.CmdEnqueue && c.Kind != frontend.CmdAwaitChild {
			continue
		}
		if c.Name == "" {
			return req, jobs.Errorf(jobs.CodeBadRequest, "run %s: a %s needs a name", req.RunID, c.Kind)
		}
		if err := jobs.ValidIdentifier("call name", c.Name); err != nil {
			return req, err
		}
		if !checked {
			if err := e.holds(ctx, req); err != nil {
				return req, err
			}
			checked, fresh = true, true
			req.Commands = append([]frontend.Command(nil), req.Commands...) // the caller's slice stays as sent
		}
		id := callID(req.RunID, c.Name)
		var out frontend.Effect
		if c.Effect != nil {
			out = *c.Effect
		}
		out.EventID, out.RunID, out.Outcome = "", "", nil
		switch c.Kind {
		case frontend.CmdPublish:
			// An event cannot be taken back, and the store's publish cannot be made on the
			// condition of the run's fence: look at the run again right before it when an
			// effect since the last look may have let a cancel in.
			if !fresh {
				if err := e.holds(ctx, req); err != nil {
					return req, err
				}
			}
			fresh = false
			publish := e.signals.PublishID
			if c.Matched {
				publish = func(ctx context.Context, id, name string, payload []byte) (signals.Published, error) {
					return e.signals.PublishPairs(ctx, id, name, payload, c.Match)
				}
			}
			pub, err := publish(ctx, id, c.Event, c.Output)
			if err != nil {
				return req, err
			}
			out.EventID = pub.EventID
		case frontend.CmdEnqueue:
			if c.Effect == nil {
				return req, noEnqueue(req.RunID, c.Name)
			}
			ereq := jobs.EnqueueRequest{Job: out.Job, Queue: out.Queue, Input: out.Input,
				Key: out.Key, Tenant: out.Tenant, NoTenant: out.NoTenant, Delay: out.Delay,
				EnqueuedBy: enqueuedByRun + req.RunID, DedupeID: id, TraceParent: out.TraceParent, TraceState: out.TraceState}
			if out.Child && !out.Detached {
				res, err := e.Enqueue(context.WithValue(ctx, callRunKey{}, id), ereq)
				if err != nil {
					return req, err
				}
				out.RunID = res.RunID
				if err := e.linkChild(ctx, req.RunID, c.Name, res, out.Detached); err != nil {
					return req, err
				}
				if res.RunID != "" {
					if err := e.linkedUnderLiveParent(ctx, req.RunID, res.RunID); err != nil {
						return req, err
					}
				}
				fresh = false
				break
			}
			res, err := e.enqueueUnderLiveRun(context.WithValue(ctx, callRunKey{}, id), req, ereq)
			if err != nil {
				return req, err
			}
			out.RunID = res.RunID
			if out.Child { // detached
				if err := e.linkChild(ctx, req.RunID, c.Name, res, out.Detached); err != nil {
					return req, err
				}
			}
			fresh = true
		case frontend.CmdAwaitChild:
			if c.Effect == nil || c.Effect.RunID == "" {
				return req, jobs.Errorf(jobs.CodeBadRequest, "run %s: await %q names no child run", req.RunID, c.Name)
			}
			outcome, err := e.childOutcome(ctx, req.RunID, c.Effect.RunID)
			if err != nil {
				return req, err
			}
			out.RunID, out.Outcome = c.Effect.RunID, outcome
		}
		req.Commands[i].Effect = &out
	}
	return req, nil
}

// noEnqueue refuses an enqueue command that carries no run to enqueue.
func noEnqueue(runID, name string) error {
	return jobs.Errorf(jobs.CodeBadRequest, "run %s: enqueue %q names no run to enqueue", runID, name)
}

// holds refuses a record whose claim is no longer the run's: a worker that lost its lease must
// not act for the run (its record would be refused after the effect was done).
func (e *Engine) holds(ctx context.Context, req frontend.RecordRequest) error {
	_, err := e.heldRun(ctx, req)
	return err
}

// heldRun is holds, with the run as read.
func (e *Engine) heldRun(ctx context.Context, req frontend.RecordRequest) (store.Run, error) {
	run, err := e.store.RunGet(ctx, req.RunID)
	if err != nil {
		return run, err
	}
	switch {
	case run.State == store.StateCancelled:
		return run, jobs.Errorf(jobs.CodeAborted, "run %s was cancelled", req.RunID)
	case run.State != store.StateRunning || run.Fence != req.Fence:
		return run, jobs.Errorf(jobs.CodeJobLeaseLost, "run %s: the claim with fence %d is no longer held", req.RunID, req.Fence)
	}
	return run, nil
}

// enqueueUnderLiveRun makes a plain enqueue (or a detached child's start) of req's run, as
// Engine.Enqueue does, and looks at the enqueuing run again before it wakes a poller for the new
// run. A cancel of the enqueuing run that committed after the record's claim check (holds) and
// before the enqueue refuses the record (X_ABORTED), yet the enqueued run would be created and
// run to its end, attributed to a run whose history never shows the call. Either the cancel
// commits after this read, and the enqueue came before it (like any enqueued run, it outlives
// its enqueuer's cancel), or this read sees it and cancels the run this call created. A run the
// call was deduped onto (a live run holding the key, or the run an earlier pass of the same call
// made) was not made by this call and is left alone. Only a cancel ends the enqueued run: a
// claim lost to an expired lease is still the enqueuer's, and its next pass repeats the call and
// is answered the same run (callID).
//
// The created run is claimable from its create to the cancel here. No poller is woken for it in
// that time, which keeps it short of a poller's fallback claim; a worker that claims it then is
// refused at its first record or heartbeat (X_ABORTED). Closing it fully takes a create made in
// one transaction with a check of the enqueuer's fence, which the store does not offer.
func (e *Engine) enqueueUnderLiveRun(ctx context.Context, req frontend.RecordRequest, ereq jobs.EnqueueRequest) (jobs.EnqueueResult, error) {
	p, err := e.PrepareRun(ctx, ereq, e.clock.Now())
	if err != nil {
		return jobs.EnqueueResult{}, err
	}
	res, err := e.createFor(ctx, ereq, p)
	if err != nil {
		return jobs.EnqueueResult{}, err
	}
	if err := heldByAnotherTenant(p, res); err != nil {
		return jobs.EnqueueResult{}, err
	}
	out := jobs.EnqueueResult{RunID: res.Run.ID, Deduped: res.Deduped}
	if res.Deduped {
		if _, err := e.heldRun(ctx, req); err != nil {
			return out, err
		}
		return out, nil
	}
	enqueuer, err := e.heldRun(ctx, req)
	if jobs.HasCode(err, jobs.CodeAborted) {
		cctx := context.WithoutCancel(ctx)
		if _, cerr := e.Cancel(cctx, res.Run.ID, enqueuerCancelledReason(enqueuer, res.Run)); cerr != nil &&
			!jobs.HasCode(cerr, jobs.CodeJobNotCancellable) {
			return out, cerr
		}
		return out, err
	}
	// Woken as Engine.Enqueue wakes, whatever the read said: a run created for a claim lost to
	// an expired lease is the one the claim's next pass is answered (see above).
	if p.Timer != nil {
		e.timers.Kick()
	} else {
		e.matching.WakeQueue(p.Run.Queue, 1)
	}
	return out, err
}

// enqueuerCancelledReason is the cancel reason of a run whose enqueuer was cancelled before its
// enqueue was recorded: it names the enqueuer to the enqueuer's own tenant only, as
// cascadeReason does.
func enqueuerCancelledReason(enqueuer, run store.Run) string {
	if enqueuer.Tenant != run.Tenant || enqueuer.ID == "" {
		return "the run that enqueued it was cancelled before the enqueue was recorded"
	}
	return "run " + enqueuer.ID + ", which enqueued it, was cancelled before the enqueue was recorded"
}

// effectEvent is the history event of a publish or enqueue that effects carried out.
func effectEvent(runID string, c frontend.Command, now time.Time) (history.Event, error) {
	if c.Effect == nil || (c.Kind == frontend.CmdPublish && c.Effect.EventID == "") ||
		(c.Kind == frontend.CmdEnqueue && c.Effect.RunID == "") {
		return history.Event{}, jobs.Errorf(jobs.CodeInvariant, "run %s: %s %q was not carried out", runID, c.Kind, c.Name)
	}
	if c.Kind == frontend.CmdPublish {
		return history.New(now, history.EventPublished{CallName: c.Name, Event: c.Event, EventID: c.Effect.EventID}), nil
	}
	return history.New(now, history.ChildEnqueued{CallName: c.Name, Job: c.Effect.Job, Key: c.Effect.Key,
		RunID: c.Effect.RunID, Child: c.Effect.Child, Detached: c.Effect.Child && c.Effect.Detached}), nil
}

// mustEncode encodes a value that cannot fail to encode (strings only), for a trace's detail.
func mustEncode(v map[string]string) []byte {
	b, _ := jobs.Encode(v)
	return b
}
