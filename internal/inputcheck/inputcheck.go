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
func RunID(id string) error {
	if id == "" {
		return jobs.Errorf(jobs.CodeBadRequest, "no run id given")
	}
	if id == "/" {
		return jobs.Errorf(jobs.CodeBadRequest, "run id %q: a URL path cannot carry it, and no run has it", id)
	}
	return jobs.ValidIdentifier("run id", id)
}

// ScheduleName refuses a schedule name that names no schedule: empty, "/" (which
// scheduler.Define refuses, as RunID says why), or not an identifier. X_BAD_REQUEST.
func ScheduleName(name string) error {
	if name == "" {
		return jobs.Errorf(jobs.CodeBadRequest, "no schedule named")
	}
	if name == "/" {
		return jobs.Errorf(jobs.CodeBadRequest, "schedule name %q: a URL path cannot carry it, and no schedule has it", name)
	}
	return jobs.ValidIdentifier("schedule name", name)
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
