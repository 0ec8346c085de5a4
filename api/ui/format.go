package ui

import (
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
)

// funcs are the templates' functions: presentation only (how a time or a number reads), never a
// number of their own.
func funcs(u *UI) template.FuncMap {
	return template.FuncMap{
		"when":  func(t time.Time) template.HTML { return when(u.clock.Now(), t) },
		"whenp": func(t *time.Time) template.HTML { return whenPtr(u.clock.Now(), t) },
		"age":   age,
		// seg is one path segment of a URL the page links or posts to: a name or id a caller
		// chose (a schedule's name comes from a worker's manifest). html/template only
		// normalizes a URL's path, so '/', '?', '#', ".." and %XX would otherwise reach the
		// browser as they are and move the link or the form to another route.
		"seg": url.PathEscape,
		// label shows a name a person must tell from others (an option of a select): as it is,
		// or quoted when the page would not show it as it is (leading, trailing or doubled
		// spaces collapse; control characters do not show).
		"label": label,
		"count": func(m map[store.State]int, s string) int { return m[store.State(s)] },
		"spark": spark,
		"rate":  func(f float64) string { return fmt.Sprintf("%.1f", f) },
		"dash": func(s string) string {
			if s == "" {
				return "—"
			}
			return s
		},
		"states": func() []store.State { return store.States },
		"pct":    func(f *float64) string { return fmt.Sprintf("%.1f", *f) },
		"deref":  func(n *int64) int64 { return *n },
		"join":   strings.Join,
		"first": func(n int, ts []time.Time) []time.Time {
			return ts[:min(n, len(ts))]
		},
		// local is a schedule's occurrence in its own zone, as its spec reads it.
		"local": func(t time.Time) string { return t.Format("Mon 15:04 MST") },
		// tail shows a run id by its end: ids made close together share their (time) prefix.
		"tail": func(s string) string {
			if len(s) > 12 {
				return "…" + s[len(s)-12:]
			}
			return s
		},
		"short": func(s string) string {
			if len(s) > 12 {
				return s[:12] + "…"
			}
			return s
		},
		"final": func(s store.State) bool { return s.Finished() },
		"dict": func(kv ...any) map[string]any {
			m := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[kv[i].(string)] = kv[i+1]
			}
			return m
		},
	}
}

// label is name as it is, or Go-quoted when whitespace or a control character would hide
// what it is.
func label(name string) string {
	prevSpace := true // a leading space is hidden too
	for _, r := range name {
		space := unicode.IsSpace(r)
		if (space && (prevSpace || r != ' ')) || (!space && !unicode.IsPrint(r)) {
			return strconv.Quote(name)
		}
		prevSpace = space
	}
	if prevSpace && name != "" {
		return strconv.Quote(name) // a trailing space
	}
	return name
}

// ago says how long ago (or how far ahead) t is, the way the CLI says it.
func ago(now, t time.Time) string {
	d := now.Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	if d < time.Second {
		return "just now"
	}
	s := age(d.Seconds())
	if future {
		return "in " + s
	}
	return s + " ago"
}

// age renders a duration in seconds compactly: 42s, 7m, 3h12m, 4d.
func age(sec float64) string {
	d := max(0, time.Duration(sec*float64(time.Second)))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		h, m := int(d.Hours()), int(d.Minutes())%60
		if m != 0 && h < 10 {
			return fmt.Sprintf("%dh%dm", h, m)
		}
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// when shows a time relative (kept fresh by the page's script, which reads datetime) and
// absolute, in UTC.
func when(now, t time.Time) template.HTML {
	if t.IsZero() {
		return "—"
	}
	abs := t.UTC().Format("2006-01-02 15:04:05Z")
	return template.HTML(fmt.Sprintf(`<time class="rel" datetime="%s" title="%s">%s</time> <span class="abs">%s</span>`,
		t.UTC().Format(time.RFC3339Nano), abs, template.HTMLEscapeString(ago(now, t)), abs))
}

func whenPtr(now time.Time, t *time.Time) template.HTML {
	if t == nil {
		return "—"
	}
	return when(now, *t)
}

// spark draws a queue's finished runs per bucket as bars (completed, with failed and
// cancelled stacked on top), scaled to the busiest bucket.
func spark(bs []engine.FinishedBucket) template.HTML {
	const w, h, gap = 8, 28, 2
	peak := 0
	for _, b := range bs {
		peak = max(peak, b.Total())
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg class="spark" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="finished per bucket">`,
		len(bs)*(w+gap), h, len(bs)*(w+gap), h)
	for i, b := range bs {
		x := i * (w + gap)
		fmt.Fprintf(&sb, `<rect class="sb-bg" x="%d" y="0" width="%d" height="%d"><title>%d completed, %d failed, %d cancelled</title></rect>`,
			x, w, h, b.Completed, b.Failed, b.Cancelled)
		if peak == 0 {
			continue
		}
		y := h
		for _, part := range []struct {
			n     int
			class string
		}{{b.Completed, "sb-ok"}, {b.Failed, "sb-fail"}, {b.Cancelled, "sb-cancel"}} {
			if part.n == 0 {
				continue
			}
			ph := max(1, part.n*h/peak)
			y -= ph
			fmt.Fprintf(&sb, `<rect class="%s" x="%d" y="%d" width="%d" height="%d"></rect>`, part.class, x, y, w, ph)
		}
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String())
}
