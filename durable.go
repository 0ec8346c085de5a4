package jobs

import (
	"context"
	"time"
)

// Step runs fn once ever per run and returns its result. The result is persisted before Step
// returns, so a run that resumes after a crash, a sleep or a retry gets the recorded result back
// without calling fn again. fn's context is cancelled with the run (and at the job's
// StepTimeout); hand it to whatever fn calls.
//
// Names are the replay key: they must be deterministic and unique in a run. A name used twice is
// X_STEP_DUPLICATE; a history whose recorded calls differ from the code's is X_REPLAY_DIVERGED.
// fn may run more than once if the worker dies between running it and recording its result, so
// write it idempotent.
//
// An error from fn fails the step. If the body returns it before its next durable call, nothing
// is recorded: the attempt fails, and a retry runs fn again. A body that goes on past the
// failure (a fallback, a retry loop) has it recorded with its next durable call, or before it
// completes, and from then on a replay (and every retry) returns the same failure, with the same
// codes (jobs.CodeOf, errors.Is on a code), retry-after and text (cleaned to valid UTF-8 and cut
// at 16 KiB), without calling fn, so the body takes the branch it took live. The error's Go type
// is not kept: match on its codes. The name stays free, so the body may call Step again under
// it; each try replays in turn. A panic in fn that the body recovers is such a failure too.
func Step[T any](c *Ctx, name string, fn func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	// One variable for what the closure sets, so capturing it costs one allocation, not two: a
	// replay calls Step once per recorded step.
	rt, err := c.runtime("step", name)
	if err != nil {
		return zero, err
	}
	out, err := rt.Step(c, name, func(ctx context.Context) ([]byte, error) {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		return Encode(v)
	})
	if err != nil {
		return zero, err
	}
	// The recorded value, decoded, live as on every replay: the value fn returned is not always
	// the one its record gives back (a time in another zone, an int in an interface read back
	// as int8, a field msgpack does not carry), and a body that saw one live and the other on
	// replay computed different things, or named a later step differently and blocked.
	var v T
	if err := Decode(out, &v); err != nil {
		return zero, err
	}
	return v, nil
}

// WakeHorizon bounds how far ahead of now the engine accepts a time at which it is to wake a run:
// a sleep's wake-up, a wait's timeout, a failed attempt's retry. A later one is refused with
// X_BAD_REQUEST, a terminal code. A retry that a policy or an error's RetryAfter puts later is
// clamped to it instead (RetryPolicy.Decide).
const WakeHorizon = 100 * 365 * 24 * time.Hour

// WakeSkew bounds how far behind now the engine accepts such a time: a worker's clock may lag
// the engine's by as much, and a time already past simply fires at once.
const WakeSkew = 24 * time.Hour

// Sleep suspends the run for d, measured from when the run first reached this call. A suspended
// run holds no worker: it is woken by the timer service, on any worker. Suspension is control
// flow, never a failure, and spends no attempt.
//
// A sleep of d <= 0 is already due: it is recorded as waking now, and the timer service wakes
// the run at once. A d beyond WakeHorizon (100 years) is refused with X_BAD_REQUEST, which fails
// the run terminally.
//
// name is the sleep's identity in the history, like a step's: it must be unique in the run and
// stable across deploys. Keep it independent of d ("grace-period", not "sleep-72h"), so a deploy
// that changes the duration still replays the runs asleep under the old one (they wake at the
// time recorded when they fell asleep).
func Sleep(c *Ctx, name string, d time.Duration) error {
	rt, err := c.runtime("sleep", name)
	if err != nil {
		return err
	}
	return rt.Sleep(c, name, d)
}

// SleepFor is Sleep with the name derived from the duration ("sleep:72h0m0s").
//
// Hazard: because the name is the duration, changing d in a deploy changes the call's identity,
// and every run asleep at that moment fails to replay (X_REPLAY_DIVERGED, the run is blocked);
// two SleepFor calls of the same duration in one run are X_STEP_DUPLICATE. Prefer Sleep with a
// name of its own. SleepFor suits only a duration that will never change, such as a constant
// written into the protocol the job implements.
func SleepFor(c *Ctx, d time.Duration) error {
	return Sleep(c, "sleep:"+d.String(), d)
}

// Match selects events by equality of their top-level fields.
type Match map[string]any

// WaitForEvent suspends the run until an event named event whose fields equal match is
// published, and returns its payload decoded as T with received true. When timeout passes first
// it returns received false and no error: a timeout is an outcome, not a failure.
//
// An event published shortly before the wait (within the engine's lookback window) still
// matches, whichever run it was published for: a second run waiting on the same name and fields
// takes an event the first run also took, while it is in the window. WithLookback narrows that to
// events since the run started (LookbackSinceRunStart) or to none at all (LookbackNone).
//
// A timeout that is not positive, or beyond WakeHorizon (100 years), or a nil option, is refused
// with X_BAD_REQUEST, which fails the run terminally.
func WaitForEvent[T any](c *Ctx, name, event string, match Match, timeout time.Duration, opts ...WaitOption) (payload T, received bool, err error) {
	var zero T
	if timeout <= 0 {
		return zero, false, Errorf(CodeBadRequest, "wait %q: timeout must be positive, got %s", name, timeout)
	}
	var o WaitOptions
	for i, opt := range opts {
		if opt == nil {
			// Refused like Define refuses a nil Option, rather than a panic of the body.
			return zero, false, Errorf(CodeBadRequest, "wait %q: option %d is nil", name, i)
		}
		opt(&o)
	}
	if !o.Lookback.Valid() {
		return zero, false, Errorf(CodeBadRequest, "wait %q: lookback %q: want %q, %q or %q", name, o.Lookback, LookbackWindow, LookbackSinceRunStart, LookbackNone)
	}
	rt, err := c.runtime("wait", name)
	if err != nil {
		return zero, false, err
	}
	raw, ok, err := rt.WaitForEvent(c, name, event, match, timeout, o)
	if err != nil || !ok {
		return zero, false, err
	}
	var v T
	if err := Decode(raw, &v); err != nil {
		return zero, false, err
	}
	return v, true, nil
}
