package engine

import (
	"context"
	"errors"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/signals"
	"github.com/ultimat3/jobs/store"
)

// A record's effects are carried out one by one, before the record is committed (effects.go),
// and each makes its own checks as it is carried out: a publish its event's name, payload and
// match (signals), an enqueue its run against the manifest (PrepareRun), an await its child. A
// record whose second effect failed one of them was refused after its first effect was done: an
// enqueued run (or a published event) stayed, for a call the run's history never shows. So
// checkEffects makes those checks for every effect after the record's first before any is
// carried out. The first effect's own refusal leaves nothing behind, so a record with one effect
// (the common one) pays nothing more. What only the store can refuse (a dedupe id another
// tenant's run holds, a store that fails) is still found as the effect is carried out; a pass of
// the run that makes the call again is answered the same effect (callID).

// errDryPublish is what dryPublishStore answers a publish that passed every check of the
// signals service: the publish would be stored.
var errDryPublish = errors.New("engine: a dry publish reached the store")

// dryPublishStore is the store of the engine's dry signals service: it publishes nothing, so
// the service's own checks are made, the same ones a real publish makes, and nothing else.
type dryPublishStore struct{ store.Store }

func (dryPublishStore) RunPublish(context.Context, store.PublishParams) (store.PublishResult, error) {
	return store.PublishResult{}, errDryPublish
}

// newDryPublish is the signals service checkEffects asks whether a publish would be refused.
func newDryPublish(cfg Config) *signals.Service {
	return signals.New(signals.Config{Store: dryPublishStore{cfg.Store}, Clock: cfg.Clock, MaxPayload: cfg.MaxPayload})
}

// checkEffects refuses a record one of whose effects after the first (from index first on)
// would be refused as it is carried out. It reads the manifest's copy and, for an await, the
// child's link; it writes nothing.
func (e *Engine) checkEffects(ctx context.Context, req frontend.RecordRequest, first int, now time.Time) error {
	for i := first + 1; i < len(req.Commands); i++ {
		c := req.Commands[i]
		if c.Kind != frontend.CmdPublish && c.Kind != frontend.CmdEnqueue && c.Kind != frontend.CmdAwaitChild {
			continue
		}
		if err := checkCallName(req.RunID, c); err != nil {
			return err
		}
		// The id of generation 0: whichever generation the run is in, fitCallID keeps the id
		// within the bounds the checks apply to it.
		id := callID(req.RunID, c.Name)
		switch c.Kind {
		case frontend.CmdPublish:
			under := store.Lease{RunID: req.RunID, Fence: req.Fence}
			var err error
			if c.Matched {
				_, err = e.dryPublish.PublishPairsUnder(ctx, under, id, c.Event, c.Output, c.Match)
			} else {
				_, err = e.dryPublish.PublishIDUnder(ctx, under, id, c.Event, c.Output)
			}
			if !errors.Is(err, errDryPublish) {
				if err == nil {
					err = jobs.Errorf(jobs.CodeInvariant, "run %s: the dry publish %q was not stopped", req.RunID, c.Name)
				}
				return err
			}
		case frontend.CmdEnqueue:
			if c.Effect == nil {
				return noEnqueue(req.RunID, c.Name)
			}
			if _, err := e.PrepareRun(ctx, effectEnqueue(req.RunID, *c.Effect, id), now); err != nil {
				return err
			}
		case frontend.CmdAwaitChild:
			if c.Effect == nil || c.Effect.RunID == "" {
				return noChild(req.RunID, c.Name)
			}
			if err := e.checkChild(ctx, req.RunID, c.Effect.RunID); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkCallName refuses an effect's call name that names nothing or that no store can hold.
func checkCallName(runID string, c frontend.Command) error {
	if c.Name == "" {
		return jobs.Errorf(jobs.CodeBadRequest, "run %s: a %s needs a name", runID, c.Kind)
	}
	return jobs.ValidIdentifier("call name", c.Name)
}

// noChild refuses an await that names no child run.
func noChild(runID, name string) error {
	return jobs.Errorf(jobs.CodeBadRequest, "run %s: await %q names no child run", runID, name)
}

// effectEnqueue is the enqueue an effect out asks of run runID under the call's id.
func effectEnqueue(runID string, out frontend.Effect, id string) jobs.EnqueueRequest {
	return jobs.EnqueueRequest{Job: out.Job, Queue: out.Queue, Input: out.Input,
		Key: out.Key, Tenant: out.Tenant, NoTenant: out.NoTenant, Delay: out.Delay,
		EnqueuedBy: enqueuedByRun + runID, DedupeID: id, TraceParent: out.TraceParent, TraceState: out.TraceState}
}
