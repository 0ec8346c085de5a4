// Package replay runs a job body against its run's history. Each durable call the body makes is
// matched, in order, against the calls the history records: a recorded call returns its recorded
// outcome without doing anything; the first unrecorded one is done live and becomes a command for
// the engine. It checks that names are unique (X_STEP_DUPLICATE) and that the code's calls agree
// with the recorded ones (X_REPLAY_DIVERGED), and it parks a suspended body so a worker can resume
// it without replaying.
//
// replay does no I/O of its own: the worker hands it a Recorder. Check replays a dumped history
// against current code, the regression test for a deploy.
package replay

import (
	"fmt"

	"github.com/ultimat3/jobs/history"
)

type callKind string

const (
	kindStep  callKind = "step"
	kindSleep callKind = "sleep"
	kindWait  callKind = "wait"
	// kindPublish and kindEnqueue act beyond the run; output holds the event's or the child
	// run's id.
	kindPublish callKind = "publish"
	kindEnqueue callKind = "enqueue"
	// kindVersion is a change point (jobs.Version); version holds the recorded version.
	kindVersion callKind = "version"
	// kindChild starts a child run (jobs.Job.StartChild); output holds its run id.
	kindChild callKind = "child"
)

type waitState int

const (
	pending waitState = iota
	done
	timedOut
)

// call is one durable call as the history records it.
type call struct {
	kind   callKind
	name   string
	seq    int64
	output []byte // step output or received event payload
	event  string // wait: the event name
	state  waitState
	// version: the recorded version of a change point.
	version int
	// fail is a step's recorded failure (history.StepFailed): replay returns it, and a Step's
	// name is free again for the body's next try.
	fail *history.StepFailed
}

func (c call) String() string {
	if c.kind == kindWait {
		return fmt.Sprintf("%s %q (event %q)", c.kind, c.name, c.event)
	}
	return fmt.Sprintf("%s %q", c.kind, c.name)
}

// calls is the fold of a history into its durable calls. It is built incrementally, so a
// resumed execution adds only the events appended since it parked.
type calls struct {
	list []call
	// futures are the recorded parallel steps (jobs.Go), by name: they are matched by name, not
	// by position, since they are recorded in the order they finished.
	futures map[string]call
	lastSeq int64
	input   []byte
	started bool // the history's RunStarted was folded (or given: Config.Fresh)
	// completed is set when the history records the run's completion.
	completed bool
	// unrecorded counts the live failures in list not yet recorded (seq 0; failed.go).
	unrecorded int
}

func (cs *calls) apply(events []history.Event) error {
	if cs.list == nil && len(events) > 1 {
		// A first fold of a long history: most events are calls, so size the list once rather
		// than growing (and copying) it log2(n) times.
		cs.list = make([]call, 0, len(events)-1)
	}
	for _, e := range events {
		if e.Seq <= cs.lastSeq {
			continue // already folded (a response and a re-read can overlap)
		}
		cs.lastSeq = e.Seq
		if !hasCall(e.Kind) {
			continue
		}
		if e.Kind == history.KindStepCompleted {
			// The common event by far, folded without boxing its payload.
			v, err := e.StepCompleted()
			if err != nil {
				return err
			}
			cs.step(e.Seq, v)
			continue
		}
		p, err := e.Decode()
		if err != nil {
			return err
		}
		switch v := p.(type) {
		case history.RunStarted:
			cs.started = true
			cs.input = v.Input
		case history.StepCompleted:
			cs.step(e.Seq, v)
		case history.StepFailed:
			cs.stepFailed(e.Seq, v)
		case history.TimerStarted:
			cs.list = append(cs.list, call{kind: kindSleep, name: v.TimerName, seq: e.Seq})
		case history.TimerFired:
			cs.settle(kindSleep, v.TimerName, done, nil)
		case history.EventWaitStarted:
			cs.list = append(cs.list, call{kind: kindWait, name: v.WaitName, seq: e.Seq, event: v.Event})
		case history.EventReceived:
			cs.settle(kindWait, v.WaitName, done, v.Payload)
		case history.EventWaitTimedOut:
			cs.settle(kindWait, v.WaitName, timedOut, nil)
		case history.EventPublished:
			cs.list = append(cs.list, call{kind: kindPublish, name: v.CallName, seq: e.Seq, output: []byte(v.EventID), state: done})
		case history.ChildEnqueued:
			k := kindEnqueue
			if v.Child {
				k = kindChild
			}
			cs.list = append(cs.list, call{kind: k, name: v.CallName, seq: e.Seq, output: []byte(v.RunID), state: done})
		case history.VersionMarked:
			cs.list = append(cs.list, call{kind: kindVersion, name: v.ChangeID, seq: e.Seq, version: v.Version, state: done})
		case history.RunRetried:
			if v.FromSeq > 0 {
				// The operator re-runs from a step: the calls recorded from it on are discarded
				// (they stay in the log as the audit trail).
				kept := cs.list[:0]
				for _, c := range cs.list {
					if c.seq < v.FromSeq {
						kept = append(kept, c)
					}
				}
				cs.list = kept
				for name, c := range cs.futures {
					if c.seq >= v.FromSeq {
						delete(cs.futures, name)
					}
				}
			}
			cs.completed = false
		case history.RunCompleted:
			cs.completed = true
		}
	}
	return nil
}

// step folds a recorded step: in order, or by name when it ran in parallel.
func (cs *calls) step(seq int64, v history.StepCompleted) {
	c := call{kind: kindStep, name: v.StepName, seq: seq, output: v.Output, state: done}
	if v.Parallel {
		if cs.futures == nil {
			cs.futures = map[string]call{}
		}
		cs.futures[v.StepName] = c
		return
	}
	cs.list = append(cs.list, c)
}

// stepFailed folds a recorded failure: into the place the body's live failure already holds, or
// as a new call. The live failures not yet recorded are the list's last unrecorded calls (the
// calls before them are recorded, and a record sends them first, in order), so the oldest is at
// len(list) - unrecorded.
func (cs *calls) stepFailed(seq int64, v history.StepFailed) {
	if v.Parallel {
		if cs.futures == nil {
			cs.futures = map[string]call{}
		}
		cs.futures[v.StepName] = call{kind: kindStep, name: v.StepName, seq: seq, state: done, fail: &v}
		return
	}
	if cs.unrecorded > 0 {
		if c := &cs.list[len(cs.list)-cs.unrecorded]; c.seq == 0 && c.fail != nil && c.name == v.StepName {
			c.seq, c.fail = seq, &v
			cs.unrecorded--
			return
		}
	}
	cs.list = append(cs.list, call{kind: kindStep, name: v.StepName, seq: seq, state: done, fail: &v})
}

// settle marks the newest pending call of that kind and name.
func (cs *calls) settle(k callKind, name string, st waitState, payload []byte) {
	for i := len(cs.list) - 1; i >= 0; i-- {
		c := &cs.list[i]
		if c.kind == k && c.name == name && c.state == pending {
			c.state = st
			c.output = payload
			return
		}
	}
}

func hasCall(k history.Kind) bool {
	switch k {
	case history.KindRunStarted, history.KindStepCompleted, history.KindTimerStarted,
		history.KindTimerFired, history.KindEventWaitStarted, history.KindEventReceived,
		history.KindEventWaitTimedOut, history.KindRunRetried, history.KindRunCompleted,
		history.KindEventPublished, history.KindChildEnqueued, history.KindVersionMarked,
		history.KindStepFailed:
		return true
	}
	return false
}
