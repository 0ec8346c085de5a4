// Package paging is the one rule for the page parameters of the engine's run listings, wherever
// they are served: the JSON API (/v1/runs, /v1/dead-letters, /v1/search/runs, and the limit of
// /v1/backfills), the /_x console and the MCP tools. A page size given is a whole number from 1
// to its maximum (0 is refused, not read as "the default": only leaving it out asks for that),
// and a cursor given is a run id, as the previous page's next names it.
package paging

import (
	"strconv"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/uuid7"
)

const (
	// Default is a run listing's page size when none is given.
	Default = 50
	// Max bounds a run listing's page size: engine.SearchRuns' bound.
	Max = engine.MaxSearchPage
	// MaxBackfills bounds the rows of one listing of the backfill ledger (which has no cursor).
	MaxBackfills = 10_000
)

// Limit reads a limit query parameter: "" is def; anything but a whole number from 1 to max is
// X_BAD_REQUEST.
func Limit(s string, def, max int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, jobs.Errorf(jobs.CodeBadRequest, "limit %q: want a whole number from 1 to %d", s, max)
	}
	return n, nil
}

// LimitOf checks a limit given as a number (an MCP tool's argument): nil is def; anything but 1
// to max is X_BAD_REQUEST.
func LimitOf(n *int, def, max int) (int, error) {
	if n == nil {
		return def, nil
	}
	if *n < 1 || *n > max {
		return 0, jobs.Errorf(jobs.CodeBadRequest, "limit %d: want a whole number from 1 to %d", *n, max)
	}
	return *n, nil
}

// Cursor checks a before parameter: "" (the first page) or a run id in the form the engine
// mints them (a UUID's canonical text, lowercase). Anything else is X_BAD_REQUEST: a page is the
// runs whose id sorts below the cursor, so "garbage" or "zz", which sort above every id, would
// silently answer the first page, and another malformed cursor some other page. A well-formed
// cursor naming no run (deleted by retention since) still pages from where it was.
func Cursor(before string) error {
	if before == "" || uuid7.IsText(before, false) {
		return nil
	}
	return jobs.Errorf(jobs.CodeBadRequest, "before %q is not a cursor: pass the next of the previous page (a run id)", clip(before))
}

// clip bounds what a refusal echoes of a parameter.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
