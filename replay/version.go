package replay

import (
	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
)

var _ jobs.Versioner = (*runtimeImpl)(nil)

// Version implements jobs.Versioner. A change point is matched against the history like any
// durable call, with one difference: when the next recorded call is not this change point, the
// run's history passed the point before the code had it, and the run keeps the original branch
// (jobs.DefaultVersion) without consuming a recorded call.
func (r *runtimeImpl) Version(c *jobs.Ctx, changeID string, min, max int) (int, error) {
	e := (*Execution)(r)
	if err := e.nested(kindVersion, changeID); err != nil {
		return 0, err
	}
	if v, ok := e.versions[changeID]; ok {
		return e.supported(changeID, v, min, max), nil
	}
	var v int
	switch {
	case e.pos < len(e.cs.list) && e.cs.list[e.pos].kind == kindVersion && e.cs.list[e.pos].name == changeID:
		v = e.cs.list[e.pos].version
		e.pos++
	case e.passed():
		v = jobs.DefaultVersion
	default:
		if e.rec == nil {
			e.verdict(Outcome{Kind: EndOfHistory})
		}
		if cause := e.aborted.Load(); cause != nil {
			return 0, jobs.Errorf(jobs.CodeAborted, "version %q: the attempt was aborted (%s)", changeID, cause.Message)
		}
		if _, err := e.record([]frontend.Command{{Kind: frontend.CmdVersion, Name: changeID, Version: max}}); err != nil {
			return 0, err
		}
		v = max
		e.pos++ // the marker just recorded
	}
	if e.versions == nil {
		e.versions = map[string]int{}
	}
	e.versions[changeID] = v
	return e.supported(changeID, v, min, max), nil
}

// passed reports whether the history shows the run went on past the current point: a recorded
// call follows, a recorded parallel step was started after it, or the run completed.
func (e *Execution) passed() bool {
	return e.pos < len(e.cs.list) || e.unclaimedFuture() != "" || e.cs.completed
}

// supported ends the claim as blocked when the code no longer carries the version the run took.
func (e *Execution) supported(changeID string, v, min, max int) int {
	if v < min || v > max {
		e.verdict(Outcome{Kind: Blocked, Err: jobs.Errorf(jobs.CodeReplayDiverged,
			"run %s: change point %q: the run took version %d, the code carries versions %d to %d",
			e.cfg.Info.RunID, changeID, v, min, max)})
	}
	return v
}
