// Package inputcheck is the one set of checks by which the operator's API refuses a caller's
// mistake before it reaches the engine, shared by the in-process client (client.Local), the HTTP
// client (api.Client, which refuses before sending) and the HTTP server (which refuses what a
// caller other than our client sends). One rule in one place, so that the same mistake gets the
// same X_ code whichever way it is sent.
package inputcheck

import (
	"time"

	"github.com/ultimat3/jobs"
)

// RunID refuses a run id that names no run any engine could hold: empty, "/" (a URL path cannot
// carry it: net/http's router reads a lone escaped slash as the trailing one, and routes the
// request nowhere), or not an identifier (jobs.ValidIdentifier: invalid UTF-8, a NUL, over 1,000
// bytes). X_BAD_REQUEST.
func RunID(id string) error { return name("run id", "no run id given", id) }

// ScheduleName refuses a schedule name that names no schedule: empty, "/" (which
// scheduler.Define refuses, as RunID says why), or not an identifier. X_BAD_REQUEST.
func ScheduleName(n string) error { return name("schedule name", "no schedule named", n) }

// name is RunID's and ScheduleName's rule for what names a run or a schedule.
func name(what, none, v string) error {
	switch v {
	case "":
		return jobs.Errorf(jobs.CodeBadRequest, "%s", none)
	case "/":
		return jobs.Errorf(jobs.CodeBadRequest, "%s %q: a URL path cannot carry it, and nothing has it", what, v)
	}
	return jobs.ValidIdentifier(what, v)
}

// Fields checks text fields given as pairs of name and value, in order: each must be an
// identifier (jobs.ValidIdentifier); an empty value is not checked further. The first refused
// is the error, X_BAD_REQUEST.
func Fields(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := jobs.ValidIdentifier(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// Overview refuses a negative window or bucket of the overview (zero means the default: 15
// minutes, by minute). X_BAD_REQUEST.
func Overview(window, bucket time.Duration) error {
	if window < 0 || bucket < 0 {
		return jobs.Errorf(jobs.CodeBadRequest, "window %s, bucket %s: want positive durations (0: the default)", window, bucket)
	}
	return nil
}
