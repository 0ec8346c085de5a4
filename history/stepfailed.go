package history

import "time"

// StepFailed records a step whose function failed and whose failure the body went on past: it
// made another durable call, or completed. Replay returns the recorded failure instead of running
// the step again, so a body that branches on it takes the branch it took live, whatever the step
// would answer now. A failure the body returns before its next durable call is not recorded: the
// attempt fails (AttemptFailed), and the retry runs the step again.
//
// A Step's name stays free: a body that tries the step again (a retry loop) records the try under
// the same name, and replay matches each try in order. A parallel step's (Parallel) does not.
type StepFailed struct {
	StepName string `msgpack:"name"`
	// Code is the failure's jobs code, "" for an error that carries none.
	Code string `msgpack:"code,omitempty"`
	// Error is the failure's text, as its Error method gave it (cleaned and cut as every failure
	// text is: frontend.MaxErrorText).
	Error string `msgpack:"error"`
	// RetryAfter is the delay the failure named (jobs.Error.RetryAfter), for the retry classes.
	RetryAfter time.Duration `msgpack:"retry_after,omitempty"`
	// Codes are the other codes in the error's chain, after Code (a jobs.Wrap of a coded error):
	// a replay's errors.Is matches them as the live error's did.
	Codes []string `msgpack:"codes,omitempty"`
	// Parallel marks a step started with jobs.Go: replay matches it by name, as a completed one,
	// and settles its future with the failure.
	Parallel bool `msgpack:"parallel,omitempty"`
}

func (StepFailed) Kind() Kind     { return KindStepFailed }
func (p StepFailed) name() string { return p.StepName }
