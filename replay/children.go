package replay

import (
	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
)

var _ jobs.Children = (*runtimeImpl)(nil)

// StartChild implements jobs.Children: a recorded start returns the child's run id; a live one
// is sent to the engine, which enqueues the child, links it and records the call.
//
// The child is stamped with the current claim's span, as an EnqueueFrom child is (effects.go):
// left to the engine, it would take the record's context, which after a resume from the sticky
// cache still carries the first claim's span, and the child's attempts would hang off a claim
// that ended before the wake-up.
func (r *runtimeImpl) StartChild(c *jobs.Ctx, name string, req jobs.EnqueueRequest, detached bool) (string, error) {
	e := (*Execution)(r)
	if req.TraceParent == "" {
		req.TraceParent, req.TraceState = jobs.TraceContext(e.spanContext(c))
	}
	return e.effect(kindChild, frontend.Command{Kind: frontend.CmdEnqueue, Name: name,
		Effect: &frontend.Effect{Job: req.Job, Queue: req.Queue, Key: req.Key, Tenant: req.Tenant,
			NoTenant: req.NoTenant, Input: req.Input, Delay: req.Delay, Child: true, Detached: detached,
			TraceParent: req.TraceParent, TraceState: req.TraceState}})
}

// AwaitChild implements jobs.Children. It is an event wait for the engine's jobs.ChildEvent as
// the history records it (EventWaitStarted, then EventReceived with the outcome), so a parked
// body resumes on the child's outcome exactly as on an event.
func (r *runtimeImpl) AwaitChild(c *jobs.Ctx, name, runID string) (jobs.ChildOutcome, error) {
	e := (*Execution)(r)
	if err := e.nested(kindWait, name); err != nil {
		return jobs.ChildOutcome{}, err
	}
	idx := e.begin(kindWait, name, jobs.ChildEvent)
	if idx < 0 {
		// A wait like WaitForEvent's, and a span event like its (trace.go), naming the child.
		e.spanEvent("jobs.wait", AttrCall.String(name), AttrEvent.String(jobs.ChildEvent), AttrChildRunID.String(runID))
		if _, err := e.record([]frontend.Command{{Kind: frontend.CmdAwaitChild, Name: name,
			Effect: &frontend.Effect{RunID: runID}, Sticky: e.cfg.Park}}); err != nil {
			e.undo(name)
			return jobs.ChildOutcome{}, err
		}
		idx = e.indexOf(kindWait, name)
	}
	rec := e.cs.list[idx]
	if rec.state == pending {
		rec = e.suspend(idx)
	}
	var o jobs.ChildOutcome
	if err := jobs.Decode(rec.output, &o); err != nil {
		return jobs.ChildOutcome{}, err
	}
	return o, nil
}
