package api

import (
	"strings"
	"testing"
)

// The redactor's scan: every run id (a UUIDv7, of either case) the credential may not see is
// replaced, each occurrence; an id it may see, and a UUID of another version, are left as they
// are; past maxRedactLookups an id that was not looked up is hidden without a store read.
func TestRedactorHidesEveryOccurrenceOfAnUnseenRunID(t *testing.T) {
	const (
		mine   = "019b8d62-7a80-7af6-8c01-4236805241a9"
		theirs = "019b8d62-7a80-7b67-b77d-3ea570db4dbf"
		v4     = "3f1c2b4a-9d8e-4c7b-a6f5-0e1d2c3b4a59"
	)
	// No engine: every lookup is spent, so only what shown holds is known.
	x := &runRedactor{tenant: "acme", shown: map[string]bool{mine: true, theirs: false}, looked: maxRedactLookups}
	for in, want := range map[string]string{
		"parent " + theirs + " was cancelled":                     "parent (hidden run) was cancelled",
		"run " + mine + " waits for " + theirs + " and " + theirs: "run " + mine + " waits for (hidden run) and (hidden run)",
		strings.ToUpper(theirs) + "/" + mine:                      "(hidden run)/" + mine,
		"order " + v4 + " failed":                                 "order " + v4 + " failed",
		"call:" + theirs + "/second":                              "call:(hidden run)/second",
		"x" + "019b8d62-7a80-7000-8000-000000000001" + "y":        "x(hidden run)y", // never looked up: hidden
		"short": "short",
	} {
		if got := x.text(in); got != want {
			t.Errorf("text(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"run:" + theirs: "run",
		"run:" + mine:   "run:" + mine,
		"ops:alice":     "ops:alice",
	} {
		if got := x.actor(in); got != want {
			t.Errorf("actor(%q) = %q, want %q", in, got, want)
		}
	}
	var none *runRedactor // an unscoped credential's
	if got := none.text("parent " + theirs); got != "parent "+theirs {
		t.Errorf("an unscoped credential's text: %q", got)
	}
}
