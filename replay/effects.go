package replay

import (
	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
)

var _ jobs.Effects = (*runtimeImpl)(nil)

// Publish implements jobs.Effects: a recorded publish returns its event id and publishes
// nothing; a live one is sent to the engine, which publishes and records it.
func (r *runtimeImpl) Publish(c *jobs.Ctx, name, event string, payload []byte) (string, error) {
	return (*Execution)(r).effect(kindPublish, frontend.Command{Kind: frontend.CmdPublish, Name: name, Event: event, Output: payload})
}

var _ jobs.MatchedEffects = (*runtimeImpl)(nil)

// PublishMatched implements jobs.MatchedEffects: Publish with the event's match fields given, so
// the engine does not read the payload (a codec may have encoded it on the way).
func (r *runtimeImpl) PublishMatched(c *jobs.Ctx, name, event string, payload []byte, match []string) (string, error) {
	return (*Execution)(r).effect(kindPublish, frontend.Command{Kind: frontend.CmdPublish, Name: name, Event: event, Output: payload, Match: match, Matched: true})
}

// Enqueue implements jobs.Effects: a recorded enqueue returns the child run's id and enqueues
// nothing; a live one is sent to the engine, which enqueues and records it.
func (r *runtimeImpl) Enqueue(c *jobs.Ctx, name string, req jobs.EnqueueRequest) (string, error) {
	if req.TraceParent == "" {
		req.TraceParent, req.TraceState = jobs.TraceContext((*Execution)(r).spanContext(c))
	}
	return (*Execution)(r).effect(kindEnqueue, frontend.Command{Kind: frontend.CmdEnqueue, Name: name,
		Effect: &frontend.Effect{Job: req.Job, Queue: req.Queue, Key: req.Key, Tenant: req.Tenant,
			NoTenant: req.NoTenant, Input: req.Input, Delay: req.Delay,
			TraceParent: req.TraceParent, TraceState: req.TraceState}})
}

func (e *Execution) effect(k callKind, cmd frontend.Command) (string, error) {
	if err := e.nested(k, cmd.Name); err != nil {
		return "", err
	}
	idx := e.begin(k, cmd.Name, "")
	if idx >= 0 {
		return string(e.cs.list[idx].output), nil
	}
	if cause := e.aborted.Load(); cause != nil {
		e.undo(cmd.Name)
		return "", jobs.Errorf(jobs.CodeAborted, "%s %q: the attempt was aborted (%s)", k, cmd.Name, cause.Message)
	}
	if _, err := e.record([]frontend.Command{cmd}); err != nil {
		e.undo(cmd.Name)
		e.failedStep = cmd.Name
		return "", err
	}
	return string(e.cs.list[e.indexOf(k, cmd.Name)].output), nil
}
