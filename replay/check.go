package replay

import (
	"context"
	"errors"
	"io/fs"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
)

// Check replays a recorded history against def's current code. It returns nil when the code makes
// the recorded durable calls in the recorded order (it stops at the first call the history does
// not record), and the X_REPLAY_DIVERGED or X_STEP_DUPLICATE error otherwise. It runs no step:
// recorded steps return their recorded outputs, which is what makes it a safe regression test
// for a deploy:
//
//	if err := replay.CheckFile(ctx, onboard, "testdata/onboard-run.jsonl"); err != nil { t.Fatal(err) }
//
// (CheckFile reads a dump of `engine history dump ID`; history.Load reads one from any reader.)
func Check(ctx context.Context, def jobs.Definition, events []history.Event) error {
	// A dump does not carry its run's id: the messages name the check instead of an empty id.
	info := jobs.RunInfo{RunID: "(replay.Check)", Job: def.Name(), Queue: def.Config().Queue, Attempt: 1}
	// What Check is given is the caller's: a history that is not one (empty, as an empty testdata
	// file is, or not started by its RunStarted) is refused as such, not left to Start, whose
	// X_INVARIANT says the engine handed a worker a broken history, a bug.
	if len(events) == 0 {
		return jobs.Errorf(jobs.CodeBadRequest, "replay.Check: the history is empty; a run's history starts with its RunStarted (seq 1)")
	}
	if events[0].Kind != history.KindRunStarted {
		return jobs.Errorf(jobs.CodeBadRequest, "replay.Check: the history's first event is %s (seq %d), not its RunStarted", events[0].Kind, events[0].Seq)
	}
	p, err := events[0].Decode()
	if err != nil {
		return jobs.Wrap(jobs.CodeEncoding, err, "replay.Check: the history's RunStarted")
	}
	rs := p.(history.RunStarted)
	if rs.Job != def.Name() {
		return jobs.Errorf(jobs.CodeReplayDiverged, "the history is of job %q, not %q", rs.Job, def.Name())
	}
	info.Actor = jobs.Actor{Tenant: rs.Tenant, EnqueuedBy: rs.EnqueuedBy}
	// The attempt the history's last events were written by: a body that reads Ctx.Attempt()
	// replays as that attempt did.
	for _, ev := range events {
		if ev.Kind == history.KindAttemptFailed {
			if p, err := ev.Decode(); err == nil {
				if af, ok := p.(history.AttemptFailed); ok && af.Attempt >= info.Attempt {
					info.Attempt = af.Attempt + 1
				}
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e, out, err := Start(ctx, Config{Def: def, Info: info}, events)
	if err != nil {
		return err
	}
	o := <-out
	<-e.Exited()
	switch o.Kind {
	case Blocked:
		return o.Err
	case Failed:
		// A rule the code broke during replay is a finding; an error the body returned from a
		// replayed step's value is the body's business, as it was when it ran, unless the history
		// records that the run went on past the point where the code now returns it.
		if c := jobs.CodeOf(o.Err); c == jobs.CodeStepDuplicate || c == jobs.CodeEncoding {
			return o.Err
		}
		if e.pos < len(e.cs.list) {
			next := e.cs.list[e.pos]
			return jobs.Errorf(jobs.CodeReplayDiverged,
				"%s: the code returned an error after %d durable calls (%v), but the history records %d; the next recorded call is %s (seq %d)",
				info.RunID, e.pos, o.Err, len(e.cs.list), next, next.seq)
		}
		if e.cs.completed {
			// The history records the run's completion: the old code returned its result where
			// the code now returns an error (or panics), so every run that reaches this point
			// would now fail where it completed. Passed as "the body's business" before, the
			// deploy test let such a change through, while a call the code now adds at the same
			// place is refused (endOfHistory).
			return jobs.Errorf(jobs.CodeReplayDiverged,
				"%s: the history records the run's completion after %d durable calls, the code now returns an error there: %v",
				info.RunID, e.pos, o.Err)
		}
	}
	return nil
}

// CheckFile is Check over a dump file written by `engine history dump ID`.
func CheckFile(ctx context.Context, def jobs.Definition, path string) error {
	events, err := LoadFile(path)
	if err != nil {
		return err
	}
	return Check(ctx, def, events)
}

// LoadFile is history.LoadFile with its refusals coded, for the checks over a dump file (this
// package's and codec/wrap's). history cannot carry jobs codes (jobs imports it): the code is
// given here. A file that cannot be opened or read is the caller's path (X_BAD_REQUEST); one
// that does not load is not a dump (X_ENCODING, naming the file and the line).
func LoadFile(path string) ([]history.Event, error) {
	events, err := history.LoadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, jobs.Wrap(jobs.CodeBadRequest, err, "replay.CheckFile")
		}
		return nil, jobs.Wrap(jobs.CodeEncoding, err, "replay.CheckFile: %s is not a history dump", path)
	}
	return events, nil
}
