package replay

import "github.com/ultimat3/jobs"

// A durable call made inside a step's function (jobs.Step within jobs.Step's fn, or from a
// goroutine while the body waits for a step) is recorded before the step itself, and on replay
// the step returns its recorded output without running its function, so the call is never made
// again: the run diverges from its own history at its first replay. It is refused where it is
// made, with an error the step's function sees and returns, before anything is recorded.

// nested refuses a durable call made while a step's function runs.
func (e *Execution) nested(kind callKind, name string) error {
	if e.stepping.Load() {
		return jobs.Errorf(jobs.CodeStepNested, "%s %q was called inside step %q's function: a step runs once and only its result is recorded, so the calls it makes would not replay; make durable calls from the body (start steps that run together with jobs.Go)", kind, name, e.steppingName)
	}
	return nil
}
