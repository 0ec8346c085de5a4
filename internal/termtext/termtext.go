// Package termtext makes text that callers, workers and operators chose (keys, tenants, job and
// step names, reasons, errors) safe to print in a terminal table: one rule for the CLI's tables
// and history.Table.
package termtext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Cell is how every value reaches a table or a header block: text that workers, callers and
// operators chose (keys, tenants, job, queue and step names, actors, reasons, errors) made safe
// for a terminal and for the table's columns. A control character (C0 with tab and newline, DEL,
// C1), a Unicode bidi control or a line separator is shown as its Go escape (\x1b, \n, \u202e),
// so an ESC cannot drive the terminal, a newline or a tab cannot break the columns, and an
// override cannot reorder what is read; a byte that is not UTF-8 is shown as \xNN. A backslash
// stays as it is: the table is for reading, --json holds the exact value. When width is
// positive, the result is clipped to width runes, ending in "…"; an escape is never cut in two.
func Cell(s string, width int) string {
	var pieces []string
	n := 0 // runes in pieces
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var p string
		switch {
		case r == utf8.RuneError && size == 1:
			p = fmt.Sprintf(`\x%02x`, s[i])
		case Hidden(r):
			p = strings.Trim(strconv.QuoteRune(r), "'")
		default:
			p = s[i : i+size]
		}
		pieces = append(pieces, p)
		n += utf8.RuneCountInString(p)
		i += size
	}
	if width <= 0 || n <= width {
		return strings.Join(pieces, "")
	}
	var b strings.Builder
	room := width - 1 // for the "…"
	for _, p := range pieces {
		w := utf8.RuneCountInString(p)
		if w > room {
			break
		}
		b.WriteString(p)
		room -= w
	}
	b.WriteString("…")
	return b.String()
}

// Hidden reports whether a rune is shown escaped by Cell: a control character, a bidi control
// (embeddings, overrides, isolates and marks, which reorder the text around them), or a line or
// paragraph separator.
func Hidden(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x2028, r == 0x2029:
		return true
	}
	return false
}
