package jobs

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// Backoff is how the delay between attempts grows.
type Backoff string

const (
	Fixed       Backoff = "fixed"
	Exponential Backoff = "exponential"
)

// RetryPolicy says how often and how soon a failed attempt is tried again.
type RetryPolicy struct {
	// Attempts is the total number of attempts, the first included. Must be ≥ 1.
	Attempts int
	// Backoff is Fixed or Exponential. Optional: default Exponential.
	Backoff Backoff
	// Delay is the wait before the second attempt. Optional: default 1s. Must be > 0 when set.
	Delay time.Duration
	// MaxDelay caps every wait, a responder's retry-after included. Optional: default none.
	MaxDelay time.Duration
	// Jitter spreads each wait uniformly over [wait/2, wait]. Optional: default off.
	Jitter bool
}

// DefaultRetryPolicy is used by a job that declares none: 3 attempts, exponential from 1s.
var DefaultRetryPolicy = RetryPolicy{Attempts: 3, Backoff: Exponential, Delay: time.Second}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Backoff == "" {
		p.Backoff = Exponential
	}
	if p.Delay == 0 {
		p.Delay = time.Second
	}
	return p
}

func (p RetryPolicy) validate() error {
	if p.Backoff == "" {
		p.Backoff = Exponential
	}
	if p.Delay == 0 {
		p.Delay = time.Second
	}
	switch {
	case p.Attempts < 1:
		return Errorf(CodeJobDefinition, "retry attempts must be at least 1, got %d", p.Attempts)
	case p.Backoff != Fixed && p.Backoff != Exponential:
		return Errorf(CodeJobDefinition, "retry backoff must be %q or %q, got %q", Fixed, Exponential, p.Backoff)
	case p.Delay <= 0:
		return Errorf(CodeJobDefinition, "retry delay must be positive, got %s", p.Delay)
	case p.MaxDelay < 0:
		return Errorf(CodeJobDefinition, "retry maxDelay must be positive, got %s", p.MaxDelay)
	}
	return nil
}

// DelayAfter returns the wait after the given failed attempt (1-based), without jitter. It is
// never more than WakeHorizon (less a day), the longest wait the engine can hold.
func (p RetryPolicy) DelayAfter(attempt int) time.Duration {
	p = p.withDefaults()
	d := p.Delay
	if p.Backoff == Exponential {
		for i := 1; i < attempt; i++ {
			if d > math.MaxInt64/2 {
				break // doubling would overflow into a negative wait
			}
			d *= 2
			if p.MaxDelay > 0 && d >= p.MaxDelay || d > 365*24*time.Hour {
				break
			}
		}
	}
	if p.MaxDelay > 0 && d > p.MaxDelay {
		d = p.MaxDelay
	}
	return min(d, maxRetryIn)
}

// maxRetryIn is the longest wait before a retry: WakeHorizon, less a day. A Delay, a MaxDelay
// or an error's RetryAfter may name more, and the engine would refuse a retry time past its
// bound with X_BAD_REQUEST: the worker could not record the failure, the lease would lapse and
// the engine hand the attempt back unspent, over and over. Clamped, the run waits, delayed,
// for what is "never" in practice, and the attempt is counted. The day's margin is for the
// worker's clock, to which the wait is added, running ahead of the engine's, against which the
// retry time is checked (the engine lets a worker's clock lag its own by as much).
const maxRetryIn = WakeHorizon - WakeSkew

// maxSchedule bounds what Schedule lists: a policy of math.MaxInt attempts is legal, and
// listing its waits is not.
const maxSchedule = 1000

// Schedule returns the waits between attempts: Attempts-1 of them, at most the first 1000.
//
//	RetryPolicy{Attempts: 5, Backoff: Exponential, Delay: time.Second}.Schedule()
//	// [1s 2s 4s 8s]
func (p RetryPolicy) Schedule() []time.Duration {
	n := min(max(p.Attempts-1, 0), maxSchedule)
	out := make([]time.Duration, 0, n)
	for a := 1; a <= n; a++ {
		out = append(out, p.DelayAfter(a))
	}
	return out
}

// String prints the policy and its schedule, e.g.
// "5 attempts, exponential, 1s → 1s, 2s, 4s, 8s".
func (p RetryPolicy) String() string {
	q := p.withDefaults()
	const shown = 12 // a longer schedule is its start and an ellipsis
	sched := p.Schedule()
	parts := make([]string, 0, min(len(sched), shown)+1)
	for i, d := range sched {
		if i == shown {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, d.String())
	}
	s := fmt.Sprintf("%d attempts, %s, %s", p.Attempts, q.Backoff, q.Delay)
	if len(parts) > 0 {
		s += " → " + strings.Join(parts, ", ")
	}
	if q.MaxDelay > 0 {
		s += fmt.Sprintf(" (max %s)", q.MaxDelay)
	}
	if q.Jitter {
		s += " with jitter"
	}
	return s
}

// Decision is what happens to a run after a failed attempt.
type Decision struct {
	// Stop is "" when the run is retried, else "terminal" or "attempts-exhausted".
	Stop string
	// RetryIn is the wait before the next attempt, when Stop is "". It is never more than
	// WakeHorizon (less a day), whatever the policy or the error's RetryAfter names.
	RetryIn time.Duration
	// Class is the failing code's retry class.
	Class RetryClass
}

// Decide applies the policy and the error's classification to a failed attempt (1-based).
func (p RetryPolicy) Decide(attempt int, err error) Decision {
	p = p.withDefaults()
	code := CodeOf(err)
	class := ClassOf(code)
	if code == "" {
		class = Unclassified
	}
	if class == Terminal {
		return Decision{Stop: "terminal", Class: class}
	}
	if attempt >= p.Attempts {
		return Decision{Stop: "attempts-exhausted", Class: class}
	}
	wait := p.DelayAfter(attempt)
	if class == RetryAfter {
		var e *Error
		if errors.As(err, &e) && e.RetryAfter > 0 {
			wait = e.RetryAfter
			if p.MaxDelay > 0 && wait > p.MaxDelay {
				wait = p.MaxDelay
			}
			return Decision{RetryIn: min(wait, maxRetryIn), Class: class}
		}
	}
	if p.Jitter && wait > 1 {
		wait = wait/2 + rand.N(wait/2+1)
	}
	return Decision{RetryIn: wait, Class: class}
}
