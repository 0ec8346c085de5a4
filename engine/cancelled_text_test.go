package engine

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A backfill pass's ledger row ends with the cancel's reason, read from the run's history. A
// reason recorded before Engine.Cancel checked it (long, invalid UTF-8, NUL) is cut and cleaned,
// so the ledger's write never fails on it (Postgres refuses NUL and invalid UTF-8 in text).
func TestCancelledTextKeepsTheLedgerWritable(t *testing.T) {
	for what, reason := range map[string]string{
		"NUL":           "withdrawn\x00now",
		"invalid UTF-8": "withdrawn\xff",
		"2 MiB":         strings.Repeat("é", 1<<20),
	} {
		got := cancelledText("run-1", reason)
		if !utf8.ValidString(got) || strings.IndexByte(got, 0) >= 0 {
			t.Errorf("%s: %q holds invalid UTF-8 or NUL", what, got)
		}
		if len(got) > 1200 {
			t.Errorf("%s: %d bytes, want the reason cut to 1,000", what, len(got))
		}
		if !strings.Contains(got, "X_RUN_CANCELLED") || !strings.Contains(got, "withdrawn") && what != "2 MiB" {
			t.Errorf("%s: %q", what, got)
		}
	}
	if got, want := cancelledText("run-1", ""), "X_RUN_CANCELLED: the pass's run run-1 was cancelled"; got != want {
		t.Errorf("no reason: %q, want %q", got, want)
	}
}
