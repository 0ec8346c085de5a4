package replay

import (
	"runtime"

	"github.com/ultimat3/jobs"
)

// A durable call made inside a step's function (jobs.Step within jobs.Step's fn, or from a
// goroutine while the body waits for a step) is recorded before the step itself, and on replay
// the step returns its recorded output without running its function, so the call is never made
// again: the run diverges from its own history at its first replay. It is refused where it is
// made, with an error the step's function sees and returns, before anything is recorded.
//
// A parallel step's function (jobs.Go) runs beside the body, so the body's own calls are not
// refused while it runs; one made from the function itself (it captured the body's Ctx) is, for
// the same reason, and because it would race the body for the call order. Go has no goroutine
// identity to ask for, so while parallel steps run the execution compares the caller's
// goroutine id (read from runtime.Stack, a microsecond) with the body's, taken at the first
// jobs.Go (made by the body: no parallel step runs before it). Calls with no parallel step
// running pay one atomic load.

// nested refuses a durable call made while a step's function runs, or from a goroutine other
// than the body's while parallel steps run.
func (e *Execution) nested(kind callKind, name string) error {
	if e.stepping.Load() {
		return jobs.Errorf(jobs.CodeStepNested, "%s %q was called inside step %q's function: a step runs once and only its result is recorded, so the calls it makes would not replay; make durable calls from the body (start steps that run together with jobs.Go)", kind, name, e.steppingName)
	}
	if e.running.Load() > 0 && goid() != e.bodyG.Load() {
		return jobs.Errorf(jobs.CodeStepNested, "%s %q was called from a goroutine other than the body's while parallel steps ran (a jobs.Go function, say): a parallel step runs once and only its result is recorded, so the calls it makes would not replay; make durable calls from the body", kind, name)
	}
	return nil
}

// goid is the calling goroutine's id, from the first line of its stack ("goroutine 18 [...").
func goid() uint64 {
	var buf [40]byte
	n := runtime.Stack(buf[:], false)
	const prefix = len("goroutine ")
	var id uint64
	for _, c := range buf[min(prefix, n):n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
