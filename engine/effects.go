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
			checked = true
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
			res, err := e.Enqueue(context.WithValue(ctx, callRunKey{}, id), jobs.EnqueueRequest{Job: out.Job, Queue: out.Queue, Input: out.Input,
				Key: out.Key, Tenant: out.Tenant, NoTenant: out.NoTenant, Delay: out.Delay,
				EnqueuedBy: enqueuedByRun + req.RunID, DedupeID: id, TraceParent: out.TraceParent, TraceState: out.TraceState})
			if err != nil {
				return req, err
			}
			out.RunID = res.RunID
			if out.Child {
				if err := e.linkChild(ctx, req.RunID, c.Name, res, out.Detached); err != nil {
					return req, err
				}
				if !out.Detached && res.RunID != "" {
					if err := e.linkedUnderLiveParent(ctx, req.RunID, res.RunID); err != nil {
						return req, err
					}
				}
			}
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
	run, err := e.store.RunGet(ctx, req.RunID)
	if err != nil {
		return err
	}
	switch {
	case run.State == store.StateCancelled:
		return jobs.Errorf(jobs.CodeAborted, "run %s was cancelled", req.RunID)
	case run.State != store.StateRunning || run.Fence != req.Fence:
		return jobs.Errorf(jobs.CodeJobLeaseLost, "run %s: the claim with fence %d is no longer held", req.RunID, req.Fence)
	}
	return nil
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
