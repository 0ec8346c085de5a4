package ui

import (
	"html/template"
	"strings"
	"testing"
)

// cutHTML measures text as the page writes it (html/template's escaping), so a payload of '<'
// is cut four times shorter than one of letters, and never inside a rune.
func TestCutHTML(t *testing.T) {
	for _, c := range []struct {
		in    string
		limit int
		want  string
	}{
		{"abc", 3, "abc"},
		{"abc", 2, "ab"},
		{"a<b", 4, "a"},
		{"a<b", 5, "a<"},
		{`"&'+`, 19, `"&'`},
		{"ééé", 5, "éé"},
		{"", 0, ""},
	} {
		got, n := cutHTML(c.in, c.limit)
		if got != c.want {
			t.Errorf("cutHTML(%q, %d) = %q, want %q", c.in, c.limit, got, c.want)
		}
		if esc := len(template.HTMLEscapeString(got)); n != esc {
			t.Errorf("cutHTML(%q, %d) counts %d bytes, the page writes %d", c.in, c.limit, n, esc)
		}
	}
	big := strings.Repeat("<", 1<<20)
	b := budget{left: sectionBudget}
	s := b.show(len(big), func() string { return big })
	if len(template.HTMLEscapeString(s.Text)) > payloadCap || s.Cut != len(big)-len(s.Text) {
		t.Errorf("a payload of 1 MiB of '<' shows %d bytes of the page, cut %d", len(template.HTMLEscapeString(s.Text)), s.Cut)
	}
	b.left = 0
	if s := b.show(42, func() string { t.Fatal("rendered past the budget"); return "" }); s.Text != "" || s.Cut != 42 {
		t.Errorf("past the budget: %+v", s)
	}
}

// label quotes a name whose whitespace or control characters a page would hide, so a select
// tells " load" from "load".
func TestLabel(t *testing.T) {
	for in, want := range map[string]string{
		"load":      "load",
		"load data": "load data",
		" load":     `" load"`,
		"load ":     `"load "`,
		"load  x":   `"load  x"`,
		"a\tb":      `"a\tb"`,
		"a\nb":      `"a\nb"`,
		"a\u200bb":  `"a\u200bb"`,
		"ünï":       "ünï",
		"":          "",
	} {
		if got := label(in); got != want {
			t.Errorf("label(%q) = %s, want %s", in, got, want)
		}
	}
}
