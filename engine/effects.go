package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
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
func callID(runID, name string) string { return fitCallID("call:"+runID+"/", name) }

// fitCallID is prefix and name, or, when that would pass jobs.MaxIdentifier (the bound of every
// id the engine keeps, a dedupe id included), prefix and "#" and the hex SHA-256 of name. A call
// name may itself be MaxIdentifier bytes, and the run id the prefix adds made its effect's id too
// long to enqueue under ("dedupeId is … bytes", of a field the caller never set). The digest keeps
// the id a function of the call, so a call done again names the same effect. A name shorter than
// the bound keeps its id as it was, so ids of calls in flight across an upgrade are unchanged.
func fitCallID(prefix, name string) string {
	if len(prefix)+len(name) <= jobs.MaxIdentifier {
		return prefix + name
	}
	sum := sha256.Sum256([]byte(name))
	return prefix + "#" + hex.EncodeToString(sum[:])
}

// callIDIn is the id of durable call name of run runID in the run's retry generation gen: the
// seq of the newest RunRetried from a step in its history (callGeneration). A retry from a step
// discards the call's record when the step came before it, and the body makes the call again
// ("the step and those after run again"): under callID alone a child start found the child made
// before (a failed one failed the parent again), an enqueue the run it enqueued, and a publish
// was dropped as a kept event id, each until the dedupe retention or the lookback forgot the id.
// Naming the generation, the call is made anew, while a resend of it, or the same call after a
// plain retry (which begins no generation), keeps the generation's id and finds that effect.
// Generation 0, a run never retried from a step, keeps callID, so a run in flight across an
// upgrade keeps its children and ids. The generation sits where the run id ends: run ids are the
// engine's UUIDs (no '@' nor '/'), while a call name may hold any character, so no name can make
// a generation's id, nor another generation's or run's.
func callIDIn(runID, name string, gen int64) string {
	if gen == 0 {
		return callID(runID, name)
	}
	return fitCallID("call:"+runID+"@"+strconv.FormatInt(gen, 10)+"/", name)
}

// callGeneration is run runID's retry generation (callIDIn), from its ledger: the engine's
// own fold of the history, never anything the worker sent (its after_seq included: a resend's
// is behind the history when its first send landed, and a hostile one could name a seq before
// the newest retry). The ledger is brought up to lastSeq at least, the run's last seq as the
// caller read it with the claim's check: no retry is appended while the claim is held, so the
// history to lastSeq holds the newest one. A record costs no history read for it: the ledger
// is at the record's after_seq already (checkBeforeEffects), which is the run's last seq, except
// for a resend whose first send landed and was not folded.
func (e *Engine) callGeneration(ctx context.Context, runID string, lastSeq int64) (int64, error) {
	l, err := e.ledgerFrom(ctx, runID, lastSeq)
	if err != nil {
		return 0, err
	}
	defer l.mu.Unlock()
	return l.retried, nil
}

// effects carries out the record's publishes and enqueues before the record is committed, and
// returns the record with their outcomes in each command's Effect. Effects cannot share the
// record's transaction (the group commit batches many runs' records), so they are made
// idempotent instead: see callID. Only the claim's holder may act for the run.
func (e *Engine) effects(ctx context.Context, req frontend.RecordRequest) (frontend.RecordRequest, error) {
	checked := false
	gen := int64(-1) // the run's retry generation, read for its first publish or enqueue
	var held int64   // the run's last seq, read with the claim's check
	for i, c := range req.Commands {
		if c.Kind != frontend.CmdPublish && c.Kind != frontend.CmdEnqueue && c.Kind != frontend.CmdAwaitChild {
			continue
		}
		if err := checkCallName(req.RunID, c); err != nil {
			return req, err
		}
		if !checked {
			run, err := e.heldRun(ctx, req)
			if err != nil {
				return req, err
			}
			held = run.LastSeq
			checked = true
			req.Commands = append([]frontend.Command(nil), req.Commands...) // the caller's slice stays as sent
		}
		var id string
		if c.Kind != frontend.CmdAwaitChild { // an await names its child's run, not an id
			if gen < 0 {
				g, err := e.callGeneration(ctx, req.RunID, held)
				if err != nil {
					return req, err
				}
				gen = g
			}
			id = callIDIn(req.RunID, c.Name, gen)
		}
		var out frontend.Effect
		if c.Effect != nil {
			out = *c.Effect
		}
		out.EventID, out.RunID, out.Outcome = "", "", nil
		switch c.Kind {
		case frontend.CmdPublish:
			// An event cannot be taken back, so it is published on the condition of the
			// record's claim, which the store checks in the publish's own transaction: a cancel
			// or another claim committed since the claim check, or since an earlier effect of
			// this record, refuses it (X_ABORTED, X_JOB_LEASE_LOST) and nothing is published.
			under := store.Lease{RunID: req.RunID, Fence: req.Fence}
			var pub signals.Published
			var err error
			if c.Matched {
				pub, err = e.signals.PublishPairsUnder(ctx, under, id, c.Event, c.Output, c.Match)
			} else {
				pub, err = e.signals.PublishIDUnder(ctx, under, id, c.Event, c.Output)
			}
			if err != nil {
				return req, err
			}
			out.EventID = pub.EventID
		case frontend.CmdEnqueue:
			if c.Effect == nil {
				return req, noEnqueue(req.RunID, c.Name)
			}
			ereq := effectEnqueue(req.RunID, out, id) // as checkEffects checked it
			if out.Child && !out.Detached {
				res, err := e.Enqueue(context.WithValue(ctx, callRunKey{}, id), ereq)
				if err != nil {
					return req, err
				}
				out.RunID = res.RunID
				if err := e.linkChild(ctx, req.RunID, c.Name, id, res, out.Detached); err != nil {
					return req, err
				}
				if res.RunID != "" {
					if err := e.linkedUnderLiveParent(ctx, req.RunID, res.RunID); err != nil {
						return req, err
					}
				}
				break
			}
			res, err := e.enqueueUnderLiveRun(context.WithValue(ctx, callRunKey{}, id), req, ereq)
			if err != nil {
				return req, err
			}
			out.RunID = res.RunID
			if out.Child { // detached
				if err := e.linkChild(ctx, req.RunID, c.Name, id, res, out.Detached); err != nil {
					return req, err
				}
			}
		case frontend.CmdAwaitChild:
			if c.Effect == nil || c.Effect.RunID == "" {
				return req, noChild(req.RunID, c.Name)
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

// heldRun refuses a record whose claim is no longer the run's, and returns the run as read: a
// worker that lost its lease must not act for the run (its record would be refused after the
// effect was done).
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
// Engine.Enqueue does (enqueueCreate), and looks at the enqueuing run again before it wakes a
// poller for the new run (wakeCreated). A cancel of the enqueuing run that committed after the
// record's claim check (heldRun) and before the enqueue refuses the record (X_ABORTED), yet the
// enqueued run would be created and run to its end, attributed to a run whose history never
// shows the call. Either the cancel
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
	p, res, err := e.enqueueCreate(ctx, ereq)
	if err != nil {
		return jobs.EnqueueResult{}, err
	}
	out := jobs.EnqueueResult{RunID: res.Run.ID, Deduped: res.Deduped}
	if res.Deduped {
		_, err := e.heldRun(ctx, req)
		return out, err
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
	e.wakeCreated(p, res)
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
