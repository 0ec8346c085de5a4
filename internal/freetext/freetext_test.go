package freetext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"plain":           "plain",
		"a\x00b":          "a\uFFFDb",
		"bad \xff byte":   "bad \uFFFD byte",
		"\xe2\x82":        "\uFFFD",
		"€ ok":            "€ ok",
		"nul\x00\xffboth": "nul\uFFFD\uFFFDboth",
	} {
		if got := Clean(in); got != want {
			t.Errorf("Clean(%q) = %q; want %q", in, got, want)
		}
	}
}

// A cut never splits a rune: a store refuses the half of a multi-byte character as invalid UTF-8.
func TestCutKeepsRunesWhole(t *testing.T) {
	s := strings.Repeat("€", 4000) // 3 bytes each
	for _, max := range []int{0, 1, 2, 3, 10_000, 11_999, 12_000, 20_000} {
		got := Cut(s, max)
		if !utf8.ValidString(got) {
			t.Fatalf("Cut(_, %d) is not valid UTF-8", max)
		}
		body := strings.TrimSuffix(got, "…")
		if len(body) > max || (max >= len(s) && got != s) || (max < len(s) && body == got) {
			t.Fatalf("Cut(_, %d) = %d bytes (%d before the ellipsis)", max, len(got), len(body))
		}
	}
	if got := Cut("a\x00b", 10); got != "a\uFFFDb" {
		t.Fatalf("Cut cleans too: %q", got)
	}
}
