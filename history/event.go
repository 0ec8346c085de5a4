// Package history defines the events of a run's history: the append-only log from which a
// worker rebuilds a run by replaying it. It owns the event kinds, their payloads, the msgpack
// codec, and the dump format (JSON lines) that an operator reads and a test replays.
//
// history knows nothing about storage: a store keeps an Event as (run, seq, kind, name, at, data)
// and never looks inside Data.
package history

import (
	"fmt"
	"strings"
	"time"
)

// Kind names an event type. The string is what stores and dumps keep, so it never changes.
type Kind string

// Every kind of event a history holds. Each has one payload type below.
const (
	KindRunStarted        Kind = "RunStarted"
	KindStepCompleted     Kind = "StepCompleted"
	KindTimerStarted      Kind = "TimerStarted"
	KindTimerFired        Kind = "TimerFired"
	KindEventWaitStarted  Kind = "EventWaitStarted"
	KindEventReceived     Kind = "EventReceived"
	KindEventWaitTimedOut Kind = "EventWaitTimedOut"
	KindAttemptFailed     Kind = "AttemptFailed"
	KindRunBlocked        Kind = "RunBlocked"
	KindRunRetried        Kind = "RunRetried"
	KindRunCompleted      Kind = "RunCompleted"
	KindRunFailed         Kind = "RunFailed"
	KindRunCancelled      Kind = "RunCancelled"
	KindEventPublished    Kind = "EventPublished"
	KindChildEnqueued     Kind = "ChildEnqueued"
	KindVersionMarked     Kind = "VersionMarked"
	KindStepFailed        Kind = "StepFailed"
)

// Event is one entry of a run's history. Seq is contiguous from 1 within a run. Name is the
// durable call's name for the kinds that have one (steps, timers, waits), so a store can show a
// trace without decoding Data.
type Event struct {
	Seq  int64     `json:"seq" msgpack:"seq"`
	Kind Kind      `json:"kind" msgpack:"kind"`
	Name string    `json:"name,omitempty" msgpack:"name,omitempty"`
	At   time.Time `json:"at" msgpack:"at"`
	Data []byte    `json:"-" msgpack:"data"`
}

// Payload is implemented by every event payload type.
type Payload interface {
	Kind() Kind
	// name is the durable call's name, or "" for kinds without one.
	name() string
}

// RunStarted is always seq 1: what was enqueued.
type RunStarted struct {
	Job        string `msgpack:"job"`
	Queue      string `msgpack:"queue"`
	Input      []byte `msgpack:"input"`
	Key        string `msgpack:"key"`
	Tenant     string `msgpack:"tenant,omitempty"`
	NoTenant   bool   `msgpack:"no_tenant,omitempty"`
	EnqueuedBy string `msgpack:"enqueued_by,omitempty"`
}

// StepCompleted records a step's output; replay returns it instead of running the step.
type StepCompleted struct {
	StepName string `msgpack:"name"`
	Output   []byte `msgpack:"output"`
	// Parallel marks a step started with jobs.Go: replay matches it by name, not by position,
	// because parallel steps are recorded in the order they finished.
	Parallel bool `msgpack:"parallel,omitempty"`
}

// TimerStarted records a durable sleep and when it wakes.
type TimerStarted struct {
	TimerName string    `msgpack:"name"`
	WakeAt    time.Time `msgpack:"wake_at"`
}

// TimerFired records that a sleep's time came. The event's At is when the timer actually fired;
// DueAt is when it was due, so lateness (an engine that was down, a backlog) reads from the
// history. Histories written before DueAt existed decode with it zero: their At was the due time.
type TimerFired struct {
	TimerName string    `msgpack:"name"`
	DueAt     time.Time `msgpack:"due_at,omitempty"`
}

// EventWaitStarted records a wait for a published event whose fields equal Match.
type EventWaitStarted struct {
	WaitName  string    `msgpack:"name"`
	Event     string    `msgpack:"event"`
	Match     []string  `msgpack:"match,omitempty"` // canonical "field=value" pairs, sorted
	TimeoutAt time.Time `msgpack:"timeout_at"`
}

// EventReceived records the event a wait received.
type EventReceived struct {
	WaitName string `msgpack:"name"`
	EventID  string `msgpack:"event_id"`
	Payload  []byte `msgpack:"payload"`
}

// ChildEventID is the id of the event that tells a parent how its child childID finished (the
// engine's jobs.ChildEvent): tag names the telling (the child's history seq, or "row" for an
// outcome read from the child's row), so telling twice is one event.
func ChildEventID(childID, tag string) string { return childEventPrefix + childID + "/" + tag }

// IsChildEventID reports whether id is a ChildEventID: the payload the event delivered is a
// jobs.ChildOutcome.
func IsChildEventID(id string) bool { return strings.HasPrefix(id, childEventPrefix) }

const childEventPrefix = "child:"

// EventWaitTimedOut records that a wait's timeout came first.
type EventWaitTimedOut struct {
	WaitName string `msgpack:"name"`
}

// Stop reasons, on AttemptFailed and RunFailed.
const (
	StopTerminal          = "terminal"
	StopAttemptsExhausted = "attempts-exhausted"
)

// AttemptFailed records one failed attempt. Stop is empty when the run will be retried at
// RetryAt, else why it stopped.
type AttemptFailed struct {
	Attempt int       `msgpack:"attempt"`
	Code    string    `msgpack:"code,omitempty"`
	Error   string    `msgpack:"error"`
	Step    string    `msgpack:"step,omitempty"`
	Stop    string    `msgpack:"stop,omitempty"`
	RetryAt time.Time `msgpack:"retry_at,omitempty"`
}

// RunBlocked records that the code no longer replays this history (X_REPLAY_DIVERGED, say). The
// run waits for a fixed deploy and an operator's retry instead of failing.
type RunBlocked struct {
	Code  string `msgpack:"code"`
	Error string `msgpack:"error"`
}

// RunRetried is an operator's retry of a dead or blocked run: who, why, and from which step.
// When FromSeq > 0, replay discards the events from FromSeq up to this one, so the steps from
// FromStep on run again; the discarded events stay in the log as the audit trail.
type RunRetried struct {
	FromStep string `msgpack:"from_step,omitempty"`
	FromSeq  int64  `msgpack:"from_seq,omitempty"`
	By       string `msgpack:"by,omitempty"`
	Reason   string `msgpack:"reason,omitempty"`
}

// RunCompleted records the run's result.
type RunCompleted struct {
	Result []byte `msgpack:"result"`
}

// RunFailed records that the run was dead-lettered.
type RunFailed struct {
	Attempt int    `msgpack:"attempt"`
	Code    string `msgpack:"code,omitempty"`
	Error   string `msgpack:"error"`
	Stop    string `msgpack:"stop"`
}

// RunCancelled records a cancellation and its reason.
type RunCancelled struct {
	Reason string `msgpack:"reason,omitempty"`
}

// EventPublished records an event the run published as a durable call (jobs.Publish). EventID
// is derived from the run and the call, so a publish retried before this was recorded is the
// same event and delivered once.
type EventPublished struct {
	CallName string `msgpack:"name"`
	Event    string `msgpack:"event"`
	EventID  string `msgpack:"event_id"`
}

// ChildEnqueued records a run the run enqueued as a durable call (Job.EnqueueFrom). The child was
// created under a dedupe id derived from the run and the call, so an enqueue retried before this
// was recorded finds the same child.
type ChildEnqueued struct {
	CallName string `msgpack:"name"`
	Job      string `msgpack:"job"`
	Key      string `msgpack:"key"`
	RunID    string `msgpack:"run_id"`
	// Child marks a child run (Job.StartChild): linked to this run as its parent, cancelled
	// with it unless Detached.
	Child    bool `msgpack:"child,omitempty"`
	Detached bool `msgpack:"detached,omitempty"`
}

func (RunStarted) Kind() Kind        { return KindRunStarted }
func (StepCompleted) Kind() Kind     { return KindStepCompleted }
func (TimerStarted) Kind() Kind      { return KindTimerStarted }
func (TimerFired) Kind() Kind        { return KindTimerFired }
func (EventWaitStarted) Kind() Kind  { return KindEventWaitStarted }
func (EventReceived) Kind() Kind     { return KindEventReceived }
func (EventWaitTimedOut) Kind() Kind { return KindEventWaitTimedOut }
func (AttemptFailed) Kind() Kind     { return KindAttemptFailed }
func (RunBlocked) Kind() Kind        { return KindRunBlocked }
func (RunRetried) Kind() Kind        { return KindRunRetried }
func (RunCompleted) Kind() Kind      { return KindRunCompleted }
func (RunFailed) Kind() Kind         { return KindRunFailed }
func (RunCancelled) Kind() Kind      { return KindRunCancelled }
func (EventPublished) Kind() Kind    { return KindEventPublished }
func (ChildEnqueued) Kind() Kind     { return KindChildEnqueued }

func (RunStarted) name() string          { return "" }
func (p StepCompleted) name() string     { return p.StepName }
func (p TimerStarted) name() string      { return p.TimerName }
func (p TimerFired) name() string        { return p.TimerName }
func (p EventWaitStarted) name() string  { return p.WaitName }
func (p EventReceived) name() string     { return p.WaitName }
func (p EventWaitTimedOut) name() string { return p.WaitName }
func (p AttemptFailed) name() string     { return p.Step }
func (RunBlocked) name() string          { return "" }
func (p RunRetried) name() string        { return p.FromStep }
func (RunCompleted) name() string        { return "" }
func (RunFailed) name() string           { return "" }
func (RunCancelled) name() string        { return "" }
func (p EventPublished) name() string    { return p.CallName }
func (p ChildEnqueued) name() string     { return p.CallName }

// New encodes p as an event at time at. Seq is left 0: the store assigns it on append.
func New(at time.Time, p Payload) Event {
	var data []byte
	var err error
	switch v := p.(type) {
	case StepCompleted:
		return NewStep(at, v)
	case RunCompleted:
		return NewCompleted(at, v)
	case RunStarted:
		data = encodeRunStarted(v)
	default:
		data, err = marshal(p)
	}
	if err != nil {
		// Payload types are plain structs of encodable fields; failing here is a bug in this
		// package, not bad input.
		panic(fmt.Sprintf("history: encode %s: %v", p.Kind(), err))
	}
	return Event{Kind: p.Kind(), Name: p.name(), At: at.UTC(), Data: data}
}

// NewStep is New for a StepCompleted, the event of every step. Passing the payload as itself
// rather than as a Payload saves boxing it on the heap, an allocation per step.
func NewStep(at time.Time, p StepCompleted) Event {
	return Event{Kind: KindStepCompleted, Name: p.StepName, At: at.UTC(), Data: encodeStepCompleted(p)}
}

// NewCompleted is New for a RunCompleted, without boxing it (see NewStep).
func NewCompleted(at time.Time, p RunCompleted) Event {
	return Event{Kind: KindRunCompleted, At: at.UTC(), Data: encodeRunCompleted(p)}
}

// Decode returns the event's payload as its concrete type (a value, not a pointer).
func (e Event) Decode() (Payload, error) {
	var p Payload
	var err error
	switch e.Kind {
	case KindRunStarted:
		if v, ok := decodeRunStarted(e.Data); ok {
			return v, nil
		}
		p, err = decodeAs[RunStarted](e.Data)
	case KindStepCompleted:
		if v, ok := decodeStepCompleted(e.Data); ok {
			return v, nil
		}
		p, err = decodeAs[StepCompleted](e.Data)
	case KindTimerStarted:
		p, err = decodeAs[TimerStarted](e.Data)
	case KindTimerFired:
		p, err = decodeAs[TimerFired](e.Data)
	case KindEventWaitStarted:
		p, err = decodeAs[EventWaitStarted](e.Data)
	case KindEventReceived:
		p, err = decodeAs[EventReceived](e.Data)
	case KindEventWaitTimedOut:
		p, err = decodeAs[EventWaitTimedOut](e.Data)
	case KindAttemptFailed:
		p, err = decodeAs[AttemptFailed](e.Data)
	case KindRunBlocked:
		p, err = decodeAs[RunBlocked](e.Data)
	case KindRunRetried:
		p, err = decodeAs[RunRetried](e.Data)
	case KindRunCompleted:
		if v, ok := decodeRunCompleted(e.Data); ok {
			return v, nil
		}
		p, err = decodeAs[RunCompleted](e.Data)
	case KindRunFailed:
		p, err = decodeAs[RunFailed](e.Data)
	case KindRunCancelled:
		p, err = decodeAs[RunCancelled](e.Data)
	case KindEventPublished:
		p, err = decodeAs[EventPublished](e.Data)
	case KindChildEnqueued:
		p, err = decodeAs[ChildEnqueued](e.Data)
	case KindVersionMarked:
		p, err = decodeAs[VersionMarked](e.Data)
	case KindStepFailed:
		p, err = decodeAs[StepFailed](e.Data)
	default:
		return nil, fmt.Errorf("history: event %d has unknown kind %q", e.Seq, e.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("history: decode event %d (%s): %w", e.Seq, e.Kind, err)
	}
	return p, nil
}

func decodeAs[T Payload](data []byte) (Payload, error) {
	var v T
	err := unmarshal(data, &v)
	return v, err
}

var kinds = map[Kind]bool{
	KindRunStarted: true, KindStepCompleted: true, KindTimerStarted: true, KindTimerFired: true,
	KindEventWaitStarted: true, KindEventReceived: true, KindEventWaitTimedOut: true,
	KindAttemptFailed: true, KindRunBlocked: true, KindRunRetried: true, KindRunCompleted: true,
	KindRunFailed: true, KindRunCancelled: true, KindEventPublished: true, KindChildEnqueued: true,
	KindVersionMarked: true, KindStepFailed: true,
}

// Known reports whether k is a kind this version understands.
func Known(k Kind) bool { return kinds[k] }
