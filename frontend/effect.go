package frontend

import "time"

// Effect is what a durable call acting beyond its run asks (CmdPublish, CmdEnqueue), and, once
// the engine carried it out, what came of it. The engine does the effect under an id derived
// from (run id, call name, the run's retry generation) before it records the call, so a call
// retried before its record landed (a lost lease, a store that failed) repeats the same effect
// instead of a second one, while a call made again after a retry from an earlier step is made anew.
type Effect struct {
	// CmdEnqueue: the run to enqueue.
	Job      string        `msgpack:"job,omitempty"`
	Queue    string        `msgpack:"queue,omitempty"`
	Key      string        `msgpack:"key,omitempty"`
	Tenant   string        `msgpack:"tenant,omitempty"`
	NoTenant bool          `msgpack:"no_tenant,omitempty"`
	Input    []byte        `msgpack:"input,omitempty"`
	Delay    time.Duration `msgpack:"delay,omitempty"`
	// Child makes the enqueued run a child of the recording run (jobs.Job.StartChild): linked
	// to it, and cancelled with it unless Detached.
	Child    bool `msgpack:"child,omitempty"`
	Detached bool `msgpack:"detached,omitempty"`
	// TraceParent and TraceState are the span the body enqueued from: the child run's attempts
	// join the parent run's trace.
	TraceParent string `msgpack:"traceparent,omitempty"`
	TraceState  string `msgpack:"tracestate,omitempty"`

	// Set by the engine, whatever a worker sent: the published event's id, the enqueued run's id.
	EventID string `msgpack:"event_id,omitempty"`
	RunID   string `msgpack:"run_id,omitempty"`
	// Outcome: CmdAwaitChild's jobs.ChildOutcome, encoded: a finished child's outcome, or, for a
	// child still on its way, one with no State naming the life the wait must match (Life).
	Outcome []byte `msgpack:"outcome,omitempty"`
}
