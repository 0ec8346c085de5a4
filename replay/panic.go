package replay

import (
	"fmt"
	"runtime/debug"
)

// A step's function may panic. Run in line (a Step without a StepTimeout), the panic unwinds the
// body, and Execution.run recovers it: the attempt fails and is retried, like a body's own
// panic. A step that runs on a goroutine of its own (a Step under a StepTimeout, every parallel
// step) has nobody above it to recover a panic, and an unrecovered panic on any goroutine ends
// the whole worker process, every other run it holds included. Those goroutines recover it into
// a stepPanic: a Step under a StepTimeout panics with it again on the body's goroutine (so it
// behaves as in line), a parallel step settles its promise with it (Await returns it, and the
// attempt fails like any failed step).

// stepPanic is a panic recovered on a step's own goroutine. It carries that goroutine's stack,
// since the goroutine that reports it (the body's, re-panicking, or whoever awaits a parallel
// step) shows only where it was reported. It has no code: like a body's panic it is
// unclassified, so the attempt is retried under the job's policy.
type stepPanic struct {
	step  string
	value any
	stack []byte
}

// recovered builds the stepPanic of a value recover() returned on step's goroutine, with that
// goroutine's stack; call it from the deferred function that recovered. A nil value is a
// runtime.Goexit (a panic(nil) recovers as a *runtime.PanicNilError): the function ended its
// goroutine without returning, which leaves a waiter nothing to wait for either. A value that is
// already a stepPanic (a Step under a StepTimeout run as a parallel step panics twice) is kept.
func recovered(step string, value any) *stepPanic {
	if p, ok := value.(*stepPanic); ok {
		return p
	}
	if value == nil {
		value = "runtime.Goexit: the function ended its goroutine without returning"
	}
	return &stepPanic{step: step, value: value, stack: debug.Stack()}
}

func (p *stepPanic) Error() string {
	return fmt.Sprintf("step %q panicked: %v\n%s", p.step, p.value, p.stack)
}
