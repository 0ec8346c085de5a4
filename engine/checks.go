package engine

import (
	"context"
	"strings"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/freetext"
	"github.com/ultimat3/jobs/internal/verdict"
	"github.com/ultimat3/jobs/internal/wire"
	"github.com/ultimat3/jobs/signals"
)

// Bounds of what a worker's command may ask. A worker computes these values from its own clock
// and code; the engine still refuses what no honest worker sends, because it stores them and
// acts on them (a timer in year 9999 never fires; one in year 1 fires at once, forever first).
// A wake-up, timeout or retry time lies within [now - jobs.WakeSkew, now + jobs.WakeHorizon].
const (
	// maxMatchPairs bounds a wait's match: every pair is an index entry in the store.
	maxMatchPairs = 64
)

// checkCommand refuses a command the engine would not store as sent: a value out of its bounds,
// an output that is not a readable msgpack value, a name no store can hold. It looks at the
// command alone; checkLedger looks at it against the run's history.
func checkCommand(runID string, i int, c *frontend.Command, now time.Time) error {
	bad := func(format string, args ...any) error {
		return jobs.Errorf(jobs.CodeBadRequest, "run %s: command %d (%s): "+format, append([]any{runID, i, c.Kind}, args...)...)
	}
	inBounds := func(field string, t time.Time) error {
		if t.Before(now.Add(-jobs.WakeSkew)) || t.After(now.Add(jobs.WakeHorizon)) {
			return bad("%s %s is outside [now - %s, now + 100 years]", field, t.UTC().Format(time.RFC3339), jobs.WakeSkew)
		}
		return nil
	}
	switch c.Kind {
	case frontend.CmdStep, frontend.CmdStepFailed, frontend.CmdSleep, frontend.CmdWait, frontend.CmdVersion, frontend.CmdAwaitChild:
		if c.Name == "" {
			return bad("names no durable call")
		}
		if err := jobs.ValidIdentifier("name", c.Name); err != nil {
			return bad("%s", err.(*jobs.Error).Message)
		}
	}
	switch c.Kind {
	case frontend.CmdStep, frontend.CmdComplete:
		if len(c.Output) > 0 {
			if err := wire.Value(c.Output); err != nil {
				return jobs.Errorf(jobs.CodeEncoding, "run %s: command %d (%s): the output is not a storable msgpack value: %s", runID, i, c.Kind, err.(*jobs.Error).Message)
			}
		}
	case frontend.CmdSleep:
		return inBounds("wake time", c.WakeAt)
	case frontend.CmdVersion:
		if c.Version < jobs.DefaultVersion {
			return bad("version %d is below %d", c.Version, jobs.DefaultVersion)
		}
	case frontend.CmdWait:
		if err := jobs.ValidIdentifier("event", c.Event); err != nil {
			return bad("%s", err.(*jobs.Error).Message)
		}
		if signals.Reserved(c.Event) {
			// The engine's own events are awaited through their own commands (CmdAwaitChild).
			return bad("event %q is the engine's own", c.Event)
		}
		if err := inBounds("timeout", c.TimeoutAt); err != nil {
			return err
		}
		if !jobs.Lookback(c.Lookback).Valid() {
			return bad("lookback %q: want \"\", %q or %q", c.Lookback, jobs.LookbackSinceRunStart, jobs.LookbackNone)
		}
		if len(c.Match) > maxMatchPairs {
			return bad("the match has %d pairs; the limit is %d", len(c.Match), maxMatchPairs)
		}
		for j, p := range c.Match {
			if err := jobs.ValidIdentifier("match pair", p); err != nil {
				return bad("%s", err.(*jobs.Error).Message)
			}
			// The canonical form (history.MatchKeys): "field=value", sorted, each pair once. A
			// store matches on it by plain equality and order, so anything else would never
			// match, or match wrongly.
			if !strings.Contains(p, "=") {
				return bad("match pair %q is not field=value", p)
			}
			if j > 0 && c.Match[j-1] >= p {
				return bad("match pairs are not sorted and unique (%q, then %q)", c.Match[j-1], p)
			}
		}
	case frontend.CmdFail:
		// A failure's texts come from the job's error (freetext): kept as they are, a NUL or a
		// bad byte made Postgres refuse the whole write, and the run was run again for ever.
		c.Code, c.Error, c.Step = freetext.Clean(c.Code), freetext.Cut(c.Error, frontend.MaxErrorText), freetext.Clean(c.Step)
		if c.Attempt < 1 {
			return bad("attempt %d; attempts count from 1", c.Attempt)
		}
		switch c.Stop {
		case "":
			if err := inBounds("retry time", c.RetryAt); err != nil {
				return err
			}
		case "terminal", "attempts-exhausted":
		default:
			return bad("stop %q is not terminal or attempts-exhausted", c.Stop)
		}
	case frontend.CmdBlock:
		c.Code, c.Error = freetext.Clean(c.Code), freetext.Cut(c.Error, frontend.MaxErrorText)
	case frontend.CmdStepFailed:
		c.Code, c.Error = freetext.Clean(c.Code), freetext.Cut(c.Error, frontend.MaxErrorText)
		if c.RetryAfter < 0 || c.RetryAfter > jobs.WakeHorizon {
			return bad("retry-after %s is outside [0, 100 years]", c.RetryAfter)
		}
		if len(c.Codes) > frontend.MaxFailureCodes {
			return bad("the failure has %d codes; the limit is %d", len(c.Codes), frontend.MaxFailureCodes)
		}
		for j := range c.Codes {
			c.Codes[j] = freetext.Clean(c.Codes[j])
		}
	case frontend.CmdRelease:
		if !c.ReadyAt.IsZero() {
			return inBounds("ready time", c.ReadyAt)
		}
	}
	return nil
}

// checkLedger refuses commands that contradict the run's history at the record's seq: a durable
// call whose name is already recorded (or used twice in the record), and a failure of an attempt
// other than the one the run is on. Called with l.mu held.
func checkLedger(runID string, l *ledger, cmds []frontend.Command) error {
	seen := map[string]bool{}
	for i, c := range cmds {
		switch c.Kind {
		case frontend.CmdStep, frontend.CmdSleep, frontend.CmdWait, frontend.CmdAwaitChild:
			if seq, ok := l.names[c.Name]; ok {
				return jobs.Errorf(jobs.CodeStepDuplicate, "run %s: command %d (%s): the name %q is already recorded (seq %d); names are the replay key and must be unique in a run", runID, i, c.Kind, c.Name, seq)
			}
			if seen[c.Name] {
				return jobs.Errorf(jobs.CodeStepDuplicate, "run %s: the record names %q twice", runID, c.Name)
			}
			seen[c.Name] = true
		case frontend.CmdStepFailed:
			// A failed try leaves the name free for the next, but never follows a call that
			// took it: the body got past that call, so it cannot be failing it now.
			if seq, ok := l.names[c.Name]; ok {
				return jobs.Errorf(jobs.CodeStepDuplicate, "run %s: command %d (%s): the name %q is already recorded (seq %d); a recorded call cannot fail", runID, i, c.Kind, c.Name, seq)
			}
			if seen[c.Name] {
				return jobs.Errorf(jobs.CodeStepDuplicate, "run %s: the record fails %q after naming it", runID, c.Name)
			}
		case frontend.CmdVersion:
			// A change point is recorded once per run; its ids are their own namespace.
			if seq, ok := l.names[versionKey(c.Name)]; ok {
				return jobs.Errorf(jobs.CodeStepDuplicate, "run %s: command %d: change point %q is already recorded (seq %d)", runID, i, c.Name, seq)
			}
			if seen[versionKey(c.Name)] {
				return jobs.Errorf(jobs.CodeStepDuplicate, "run %s: the record names change point %q twice", runID, c.Name)
			}
			seen[versionKey(c.Name)] = true
		case frontend.CmdFail:
			if c.Attempt != l.attempt {
				return jobs.Errorf(jobs.CodeBadRequest, "run %s: the failure is of attempt %d; the run is on attempt %d", runID, c.Attempt, l.attempt)
			}
		}
	}
	return nil
}

// stopExhausted is the stop reason of a run whose attempts ran out.
const stopExhausted = "attempts-exhausted"

// exhaust turns a failure the worker would retry into the run's last one when the job's declared
// attempts are spent: a worker whose retry policy drifted from its declaration (or that lies)
// cannot retry a run forever. It reports whether it changed a command.
func (e *Engine) exhaust(ctx context.Context, job string, cmds []frontend.Command) bool {
	changed := false
	for i := range cmds {
		c := &cmds[i]
		if c.Kind != frontend.CmdFail || c.Stop != "" || job == "" {
			continue
		}
		f, err := e.fleetView(ctx, false)
		if err != nil {
			continue
		}
		if n := f.attempts(job); n > 0 && c.Attempt >= n {
			c.Stop, c.RetryAt = stopExhausted, time.Time{}
			c.Error = verdict.Exhausted(c.Error, c.Attempt, n)
			changed = true
		}
	}
	return changed
}

// lastError is a failed attempt's error with its code, as the run's last error.
func lastError(c frontend.Command) string {
	msg := "attempts exhausted; last error: "
	if verdict.Exhausting(c.Error) {
		msg = "last error: " // the error ends saying so already
	}
	if c.Code != "" && !strings.HasPrefix(c.Error, c.Code) {
		msg += c.Code + ": "
	}
	return msg + c.Error
}
