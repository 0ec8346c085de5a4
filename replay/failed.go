package replay

import (
	"fmt"
	"strings"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/freetext"
)

// A step whose function fails writes nothing at once: most failures end the attempt (the body
// returns them), and the retry must run the step again. But a body may go on past a failure (a
// fallback, a retry loop with sleeps between tries), and then the failure decided what it did
// next. Unrecorded, a replay would run the step again, and if it succeeded this time the body
// would take the other branch and diverge from its own history. So a failure (a Step's, or a
// parallel step's as it happens) is queued, and goes out as history.StepFailed ahead of the
// body's next record, whatever that is (a step, a sleep; alone before a jobs.Go and before the
// run completes). Never with a parallel step's own record: that may land before the body has
// decided anything, and a failure it then returns would be replayed on every retry. A failure
// the body returns before its next record is dropped with the attempt: the retry runs the step
// again, as before. It costs no commit of its own except before a jobs.Go or a completion, and
// nothing on a run whose steps do not fail.

// stepFailed takes a live step's failure: the name is free for another try, and unless nothing
// will be recorded (check mode, an aborted attempt) the failure keeps its place among the calls
// and is queued for the next record. Body goroutine.
func (e *Execution) stepFailed(name string, err error) {
	e.failedStep = name
	e.csMu.Lock()
	// The calls before this one are all recorded (a sequential call is recorded before the body
	// goes on), so it is the next in the list.
	if e.rec == nil || e.aborted.Load() != nil || len(e.cs.list) != e.pos-1 {
		e.csMu.Unlock()
		e.undo(name)
		return
	}
	delete(e.names, name)
	f := failure(name, err, false)
	// seq 0 until the record lands (calls.stepFailed gives it its seq): the body has made this
	// call, and its next one is matched after it.
	e.cs.list = append(e.cs.list, call{kind: kindStep, name: name, state: done, fail: f})
	e.cs.unrecorded++
	e.csMu.Unlock()
	e.queue(f)
}

// failure is a failed step's record: its codes, its text (cleaned and cut as the engine keeps
// it, so a record of many failures stays small) and the delay it named.
func failure(name string, err error, parallel bool) *history.StepFailed {
	f := &history.StepFailed{StepName: name, Error: freetext.Cut(errorText(err), frontend.MaxErrorText), Parallel: parallel}
	var first *jobs.Error
	first, f.Codes = codesOf(err)
	if first != nil {
		// Clamped as the retry policy clamps it: a delay past the horizon waits at the horizon.
		f.Code, f.RetryAfter = string(first.Code), min(max(first.RetryAfter, 0), jobs.WakeHorizon)
	}
	return f
}

// codesOf walks err's tree in the order errors.As and errors.Is do: first is the *jobs.Error
// they find first (jobs.CodeOf's), others the codes of the later ones, each once, at most
// frontend.MaxFailureCodes.
func codesOf(err error) (first *jobs.Error, others []string) {
	seen := map[jobs.Code]bool{}
	var walk func(error)
	walk = func(err error) {
		if err == nil || len(others) == frontend.MaxFailureCodes {
			return
		}
		if je, ok := err.(*jobs.Error); ok && je != nil {
			switch {
			case first == nil:
				first = je
				seen[je.Code] = true
			case je.Code != "" && !seen[je.Code]:
				seen[je.Code] = true
				others = append(others, string(je.Code))
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	func() {
		defer func() { _ = recover() }() // an Unwrap of a typed nil, as errorText's Error
		walk(err)
	}()
	return first, others
}

// errorText is err's text. A step may return a typed nil (a nil *MyError as an error), which
// is not a nil error, and whose Error method may well dereference it: the body that only
// checks err != nil must not see the engine panic on it.
func errorText(err error) (text string) {
	defer func() {
		if recover() != nil {
			text = fmt.Sprintf("%T (its Error method panicked)", err)
		}
	}()
	return err.Error()
}

// queue queues f for the body's next record.
func (e *Execution) queue(f *history.StepFailed) {
	e.recMu.Lock()
	e.handled = append(e.handled, frontend.Command{Kind: frontend.CmdStepFailed, Name: f.StepName, Code: f.Code,
		Error: f.Error, RetryAfter: f.RetryAfter, Codes: f.Codes, Parallel: f.Parallel})
	e.queued.Store(int32(len(e.handled)))
	e.recMu.Unlock()
}

// futureFailed queues a parallel step's failure for the body's next record, as a failed Step's:
// a failure that happened before the body's next durable call is history from that call on.
// Matched by name on replay, so it needs no place among the calls. The step's goroutine.
func (e *Execution) futureFailed(name string, err error) {
	if e.rec == nil || e.aborted.Load() != nil {
		return
	}
	e.queue(failure(name, err, true))
}

// handledBytes bounds the failure texts a record carries: their texts are cut to
// frontend.MaxErrorText each, but a loop of failures between two records could still add up past
// what a request may carry.
const handledBytes = 256 << 10

// withHandled returns cmds after the failures queued since the last record. Failures too many,
// or too large, to go with cmds in one record go ahead in records of their own. recMu held.
func (e *Execution) withHandled(cmds []frontend.Command) ([]frontend.Command, error) {
	for {
		n, size := 0, 0
		for n < len(e.handled) && n+len(cmds) < frontend.MaxRecordCommands && size+len(e.handled[n].Error) <= handledBytes {
			size += len(e.handled[n].Error)
			n++
		}
		if n == len(e.handled) {
			break // they all go with cmds
		}
		// Ahead, alone: as many as one record takes, at least one.
		n, size = 0, 0
		for n < len(e.handled) && n < frontend.MaxRecordCommands && (n == 0 || size+len(e.handled[n].Error) <= handledBytes) {
			size += len(e.handled[n].Error)
			n++
		}
		resp, err := e.send(e.handled[:n])
		if err != nil {
			return nil, err
		}
		if err := e.fold(resp.Appended); err != nil {
			return nil, err
		}
		e.handled = e.handled[n:]
		e.queued.Store(int32(len(e.handled)))
	}
	if len(e.handled) == 0 {
		return cmds, nil
	}
	out := make([]frontend.Command, 0, len(e.handled)+len(cmds))
	return append(append(out, e.handled...), cmds...), nil
}

// flushHandled records the failures still queued, before the run completes: the completion
// would otherwise be a history whose replay runs those steps again.
func (e *Execution) flushHandled() error {
	if e.queued.Load() == 0 {
		return nil // without the lock: a record in flight holds it
	}
	e.recMu.Lock()
	defer e.recMu.Unlock()
	if len(e.handled) == 0 {
		return nil
	}
	_, err := e.recordLocked(nil, true)
	return err
}

// stepFailure is a recorded failure as replay returns it: the text the live error gave and,
// beneath it, its codes, so jobs.CodeOf, jobs.HasCode, errors.Is on a code and the job's retry
// policy read it as they read the live error. The live error's own type is not kept: match a
// failure by its codes.
type stepFailure struct {
	text  string
	codes []error // *jobs.Error, the first with the message and the retry-after
}

func (f *stepFailure) Error() string { return f.text }

func (f *stepFailure) Unwrap() []error { return f.codes }

func replayedFailure(f *history.StepFailed) error {
	out := &stepFailure{text: f.Error}
	if f.Code != "" {
		out.codes = append(out.codes, &jobs.Error{Code: jobs.Code(f.Code), Message: strings.TrimPrefix(f.Error, f.Code+": "),
			RetryAfter: f.RetryAfter})
	}
	for _, c := range f.Codes {
		out.codes = append(out.codes, &jobs.Error{Code: jobs.Code(c)})
	}
	return out
}
