package ui_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// declareSchedules sends a worker's manifest hosting tick and schedules of these names (what a
// worker credential may post to /v1/worker/manifest), and returns a scheduler reading the
// fleet's declarations, as `engine serve` wires it.
func declareSchedules(t *testing.T, env *testenv.Env, names ...string) *scheduler.Scheduler {
	t.Helper()
	reg, err := jobs.NewRegistry(tick)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		s, err := scheduler.Define(n, tick, "0 * * * *", "UTC", tickIn{N: 1})
		if err != nil {
			t.Fatalf("schedule %q is refused: %v", n, err)
		}
		if err := reg.Declare(s.Declaration()); err != nil {
			t.Fatal(err)
		}
	}
	decls, err := reg.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Engine.DeclareManifest(context.Background(), frontend.Manifest{WorkerID: "w-sched", Queues: reg.Queues(), Declarations: decls}); err != nil {
		t.Fatal(err)
	}
	sc, err := scheduler.New(scheduler.Config{Engine: env.Engine, ID: "e-sched", Schedules: scheduler.FromManifest(env.Engine), Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Stop(context.Background()) })
	return sc
}

// formTarget is where a browser posts the form of page whose data-confirm starts with confirm:
// its action resolved against the page's URL (RFC 3986: dot segments removed, '?' starts the
// query, '#' the fragment, which is not sent).
func formTarget(t *testing.T, base, pagePath, page, confirm string) string {
	t.Helper()
	for _, m := range postForm.FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(html.UnescapeString(m[2]), confirm) {
			continue
		}
		ref, err := url.Parse(html.UnescapeString(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		pageURL, _ := url.Parse(base + pagePath)
		return pageURL.ResolveReference(ref).RequestURI()
	}
	t.Fatalf("no form confirming %q on %s", confirm, pagePath)
	return ""
}

var postForm = regexp.MustCompile(`<form method="post" action="([^"]*)" data-confirm="([^"]*)"`)

// A schedule's name (chosen by whoever holds a worker credential) is one path segment of its
// forms' actions: each of Pause, Resume and Trigger acts on that schedule and nothing else,
// whatever the name holds ('/', "..", '?', '#', '%', spaces), and a name that reads as another
// one escaped ("team%2Fnightly") is not taken for it.
func TestScheduleFormsActOnTheirOwnSchedule(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	ctx := context.Background()
	victim, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "import", Queue: "manual", Key: "victim", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{
		"x/../../runs/" + victim.RunID + "/cancel?",
		"team/nightly", "team%2Fnightly", "team%2fnightly",
		"a#frag", "q?verb=trigger", "x/..", "..x", "%2e%2e", "sp ace/+", "ünï/cödé",
	}
	sc := declareSchedules(t, env, names...)
	base := serveOps(t, env, sc, "")
	b := newBrowser(t, base)
	_, page := b.get("/_x/schedules")
	token := csrf(t, page)

	state := func() map[string]bool {
		m := map[string]bool{}
		for _, n := range names {
			m[n] = paused(t, sc, n)
		}
		return m
	}
	for _, n := range names {
		_, page = b.get("/_x/schedules")
		target := formTarget(t, base, "/_x/schedules", page, "Pause schedule "+n)
		if want := "/_x/schedules/" + url.PathEscape(n) + "/pause"; target != want {
			t.Errorf("schedule %q: Pause posts to %s, want %s", n, target, want)
		}
		before := state()
		st, body, _ := b.post(target, url.Values{"csrf": {token}})
		want(t, "pause "+n, st, body, http.StatusSeeOther)
		after := state()
		for _, o := range names {
			if wantPaused := before[o] || o == n; after[o] != wantPaused {
				t.Errorf("Pause on schedule %q: schedule %q paused %v, want %v", n, o, after[o], wantPaused)
			}
		}

		_, page = b.get("/_x/schedules")
		target = formTarget(t, base, "/_x/schedules", page, "Fire schedule "+n)
		st, body, _ = b.post(target, url.Values{"csrf": {token}})
		want(t, "trigger "+n, st, body, http.StatusSeeOther)
		if got := manualRuns(t, env, n); len(got) != 1 {
			t.Errorf("Trigger on schedule %q made runs %v, want one", n, got)
		}
	}
	// Resume, from the page of every schedule paused.
	for _, n := range names {
		_, page = b.get("/_x/schedules")
		st, body, _ := b.post(formTarget(t, base, "/_x/schedules", page, "Resume schedule "+n), url.Values{"csrf": {token}})
		want(t, "resume "+n, st, body, http.StatusSeeOther)
		if paused(t, sc, n) {
			t.Errorf("Resume on schedule %q left it paused", n)
		}
	}
	if run, err := env.Engine.GetRun(ctx, victim.RunID); err != nil {
		t.Fatal(err)
	} else if run.State == store.StateCancelled {
		t.Errorf("a schedule's form cancelled run %s", victim.RunID)
	}
}

// urlAttr is an attribute holding a URL, and its value.
var urlAttr = regexp.MustCompile(`\b(href|action|src|formaction)="([^"]*)"`)

// pathAction is one {{…}} action in the path of a URL (before its '?' or '#').
var pathAction = regexp.MustCompile(`\{\{[^}]*\}\}`)

// Every value a template writes into the path of a URL is the console's own prefix or goes
// through seg (url.PathEscape): html/template leaves '/', '?', '#', ".." and %XX of a path as
// they are, so a name or id written bare can move a link or a form to another route. In a query
// html/template escapes a value whole, so only the path needs this.
func TestTemplatesEscapeEveryPathSegment(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("assets", "*.html"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no templates: %v", err)
	}
	// The prefix and the navigation's paths are the console's own; NextURL is a whole query
	// ("?" and url.Values.Encode).
	safe := regexp.MustCompile(`^\{\{-? *(\$\.Prefix|\.Prefix|\$p|\.Path|\$d\.NextURL|seg [^}]*) *-?\}\}$`)
	checked := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range urlAttr.FindAllStringSubmatch(string(src), -1) {
			path := m[2]
			if i := strings.IndexAny(path, "?#"); i >= 0 {
				path = path[:i]
			}
			for _, a := range pathAction.FindAllString(path, -1) {
				checked++
				if !safe.MatchString(a) {
					t.Errorf("%s: %s=%q writes %s into a URL's path unescaped: use {{seg …}}", f, m[1], m[2], a)
				}
			}
		}
	}
	if checked == 0 {
		t.Error("found no URL to check: the test reads nothing")
	}
}
