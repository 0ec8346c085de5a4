// Package freetext is the one rule for free text a caller hands the engine to keep: an
// attempt's error, a block's reason, a backfill's last error. Such text comes from anywhere (an
// error wrapping bytes a parser choked on, a driver's message) and every store must be able to
// keep it: Postgres refuses a text value holding NUL or invalid UTF-8 outright, and the refusal
// failed the whole write, so the failure was never recorded and the run went on being claimed
// and run again. Memory and SQLite kept such text, so the rule is the engine's, not a store's.
package freetext

import (
	"strings"
	"unicode/utf8"
)

// Clean returns s with every invalid UTF-8 sequence and every NUL replaced by U+FFFD; s itself
// when it has neither.
func Clean(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// Cut returns Clean(s) cut to at most max bytes on a rune boundary, with "…" after the cut when
// it cut anything (the result may then be up to len("…") bytes over max).
func Cut(s string, max int) string {
	s = Clean(s)
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
