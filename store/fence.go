package store

import "github.com/ultimat3/jobs"

// FenceRefusal is the one wording of a write's fence check, shared by every backend and the
// engine: why a worker holding fence may not write to run runID, which is in state with fence
// current; nil when it may. A cancelled run is X_ABORTED; any other is X_JOB_LEASE_LOST, saying
// which of three things happened, since a worker's log is where its author looks: the claim's
// own attempt ended (a write from code that outlived the body), the run left running, or
// another claim took it.
func FenceRefusal(runID string, state State, current, fence int64) error {
	switch {
	case state == StateRunning && current == fence:
		return nil
	case state == StateCancelled:
		return jobs.Errorf(jobs.CodeAborted, "run %s was cancelled", runID)
	case current == fence && state.Finished():
		return jobs.Errorf(jobs.CodeJobLeaseLost, "run %s is %s: its attempt ended, and a write after the body returned (from a goroutine it left running) is refused", runID, state)
	case current == fence:
		return jobs.Errorf(jobs.CodeJobLeaseLost, "run %s is %s, no longer running", runID, state)
	default:
		return jobs.Errorf(jobs.CodeJobLeaseLost, "run %s was claimed again (fence %d, this claim's %d)", runID, current, fence)
	}
}
