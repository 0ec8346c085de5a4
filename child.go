package jobs

import "strings"

// Child runs: a run starts a run of another job as a durable call, linked to it as its parent,
// and may wait for its result. Starting happens once per call name (like EnqueueFrom: the
// engine creates the child under a dedupe id derived from the parent and the call), and once
// more after each operator's retry of the parent from a step before the start. Waiting
// suspends the parent without holding a worker, like an event wait; the engine wakes it when
// the child finishes, and the child's outcome is recorded in the parent's history, so a replay
// reads it back. Cancelling the parent cancels its children, unless they were started Detached.

// ChildEvent is the name of the event the engine publishes when a child run finishes; its
// payload is a ChildOutcome. Event names starting with "jobs:" are the engine's: nobody else
// may publish them.
const ChildEvent = "jobs:child"

// ChildOutcome is how a child run finished, as its parent's history records it.
type ChildOutcome struct {
	RunID  string `json:"runId" msgpack:"run_id"`
	State  string `json:"state" msgpack:"state"` // completed | failed | cancelled
	Result []byte `json:"result,omitempty" msgpack:"result,omitempty"`
	Code   string `json:"code,omitempty" msgpack:"code,omitempty"`
	// Error is the child's error text; for a cancelled child (Code X_RUN_CANCELLED), the cancel's
	// reason.
	Error string `json:"error,omitempty" msgpack:"error,omitempty"`
	// Life is the seq of the operator's retry (RunRetried) that began the life of the child that
	// finished so; 0 for its first. A parent waiting for a retried child matches on it, so an
	// outcome of the child's earlier life is not taken for its current one's.
	Life int64 `json:"life,omitempty" msgpack:"life,omitempty"`
}

// Children is implemented by runtimes that start and await child runs (the worker's replay
// runtime).
type Children interface {
	// StartChild returns the recorded child run id of the call named name, or starts the child
	// and records it.
	StartChild(c *Ctx, name string, req EnqueueRequest, detached bool) (runID string, err error)
	// AwaitChild returns the recorded outcome of the wait named name, or suspends the run until
	// the child runID finishes.
	AwaitChild(c *Ctx, name, runID string) (ChildOutcome, error)
}

// ChildOption configures StartChild.
type ChildOption func(*childOptions)

type childOptions struct{ detached bool }

// Detached starts a child that outlives its parent's cancellation.
func Detached() ChildOption { return func(o *childOptions) { o.detached = true } }

// ChildRun is a child run started by StartChild.
type ChildRun[Out any] struct {
	// Name is the durable call that started it.
	Name  string
	RunID string
}

// StartChild starts a run of the job as a child of the run c, as the durable call name: once
// per run, however often c is replayed or retried, except that a retry from a step before the
// start (`jobs retry ID --from-step S`) discards its record, and the start made again starts a
// new child; the earlier child is left as it is. The child's idempotency key is its
// job's, as for any enqueue; when a live run outside this parent already holds it, that run is
// returned, and it is not this run's child (it cannot be awaited, nor is it cancelled with c).
func (j *Job[In, Out]) StartChild(c *Ctx, name string, in In, opts ...ChildOption) (ChildRun[Out], error) {
	var o childOptions
	for _, opt := range opts {
		opt(&o)
	}
	ch, ok := rtOf(c).(Children)
	if !ok {
		return ChildRun[Out]{}, Errorf(CodeInvariant, "child %s: this runtime cannot start child runs", name)
	}
	req, err := j.Request(in)
	if err != nil {
		return ChildRun[Out]{}, err
	}
	id, err := ch.StartChild(c, name, req, o.detached)
	if err != nil {
		return ChildRun[Out]{}, err
	}
	return ChildRun[Out]{Name: name, RunID: id}, nil
}

// Wait suspends the run until the child finishes and returns its result: a durable call named
// "wait:" + the start's name. A child that failed or was cancelled is X_CHILD_FAILED, with the
// child's own error in the message; its run id stays on the ChildRun for an operator.
func (r ChildRun[Out]) Wait(c *Ctx) (Out, error) {
	var zero Out
	ch, ok := rtOf(c).(Children)
	if !ok {
		return zero, Errorf(CodeInvariant, "child %s: this runtime cannot await child runs", r.Name)
	}
	o, err := ch.AwaitChild(c, "wait:"+r.Name, r.RunID)
	if err != nil {
		return zero, err
	}
	if o.State != "completed" {
		code := o.Code
		if code == "" {
			code = o.State
		}
		// The stored text is usually the attempt's error as its worker printed it, "CODE: …":
		// the code is not said twice.
		msg := strings.TrimPrefix(o.Error, code+": ")
		if msg == "" {
			return zero, Errorf(CodeChildFailed, "child run %s (%s) %s: %s", o.RunID, r.Name, o.State, code)
		}
		return zero, Errorf(CodeChildFailed, "child run %s (%s) %s: %s: %s", o.RunID, r.Name, o.State, code, msg)
	}
	var v Out
	if err := Decode(o.Result, &v); err != nil {
		return zero, err
	}
	return v, nil
}

// Call starts a child run and waits for its result: StartChild, then Wait.
func (j *Job[In, Out]) Call(c *Ctx, name string, in In, opts ...ChildOption) (Out, error) {
	r, err := j.StartChild(c, name, in, opts...)
	if err != nil {
		var zero Out
		return zero, err
	}
	return r.Wait(c)
}
