package termtext

import (
	"testing"
	"unicode/utf8"
)

func TestCell(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		width int
		want  string
	}{
		{"plain", 0, "plain"},
		{"a\x1b[2Jb", 0, `a\x1b[2Jb`},
		{"tab\there\nnext\rcr", 0, `tab\there\nnext\rcr`},
		{"del\x7f c1\u009b bell\a", 0, `del\x7f c1\u009b bell\a`},
		{"abc\u202edef\u2066\u200f", 0, `abc\u202edef\u2066\u200f`},
		{"line\u2028sep", 0, `line\u2028sep`},
		{"bad\xffutf8", 0, `bad\xffutf8`},
		{"héllo wörld ✓ 日本", 0, "héllo wörld ✓ 日本"}, // printable text is left alone
		{`back\slash`, 0, `back\slash`},
		{"abcdefghij", 10, "abcdefghij"},
		{"abcdefghijk", 10, "abcdefghi…"},
		{"日本語のテキストです", 5, "日本語の…"},
		// An escape is never cut in two: it goes whole or not at all.
		{"abcdefg\x1bxyz", 10, "abcdefg…"},
		{"ab\x1b", 6, `ab\x1b`},
		{"ab\x1bc", 6, "ab…"},
	} {
		if got := Cell(tc.in, tc.width); got != tc.want {
			t.Errorf("Cell(%q, %d) = %q, want %q", tc.in, tc.width, got, tc.want)
		}
		if tc.width > 0 && utf8.RuneCountInString(Cell(tc.in, tc.width)) > tc.width {
			t.Errorf("Cell(%q, %d) is wider than %d", tc.in, tc.width, tc.width)
		}
	}
}
