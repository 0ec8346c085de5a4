package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// browser is a cookie-keeping client that does not follow redirects, so a test sees each answer.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

func (b *browser) do(req *http.Request) (int, string, http.Header) {
	b.t.Helper()
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body), res.Header
}

func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
	st, body, _ := b.do(req)
	return st, body
}

func (b *browser) post(path string, form url.Values, hdr ...string) (int, string, http.Header) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return b.do(req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token a page's forms carry.
func csrf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("the page carries no CSRF token")
	}
	return m[1]
}

func want(t *testing.T, what string, status int, body string, wantStatus int, contains ...string) {
	t.Helper()
	if status != wantStatus {
		t.Errorf("%s: status %d, want %d; body: %.300s", what, status, wantStatus, body)
	}
	for _, c := range contains {
		if !strings.Contains(body, c) {
			t.Errorf("%s: the page does not contain %q", what, c)
		}
	}
}

func kinds(t *testing.T, env *testenv.Env, id string) []history.Kind {
	var out []history.Kind
	for _, e := range env.History(id) {
		out = append(out, e.Kind)
	}
	return out
}

// Every page renders the engine's projections, on every store.
func TestPages(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		runs := seed(t, env)
		b := newBrowser(t, serve(t, env, ""))

		st, body := b.get("/_x/")
		want(t, "overview", st, body, http.StatusOK, "orders", "manual", `class="spark"`, "Oldest ready")
		st, body = b.get("/_x")
		want(t, "/_x redirects", st, body, http.StatusTemporaryRedirect)

		st, body = b.get("/_x/runs")
		want(t, "runs", st, body, http.StatusOK)
		for state, id := range runs {
			if !strings.Contains(body, id) {
				t.Errorf("runs: the %s run %s is not listed", state, id)
			}
		}
		st, body = b.get("/_x/runs?state=failed")
		want(t, "runs by state", st, body, http.StatusOK, runs[store.StateFailed])
		if strings.Contains(body, runs[store.StateCompleted]) {
			t.Error("runs?state=failed lists the completed run")
		}
		st, body = b.get("/_x/runs?q=" + runs[store.StateBlocked])
		want(t, "search by id", st, body, http.StatusOK, runs[store.StateBlocked])
		if strings.Contains(body, runs[store.StateReady]) {
			t.Error("a search by id lists another run")
		}
		st, body = b.get("/_x/runs?q=import-4&tenant=globex&job=import&queue=manual")
		want(t, "search by key", st, body, http.StatusOK, runs[store.StateReady])
		if strings.Contains(body, runs[store.StateDelayed]) {
			t.Error("a search by key lists another run")
		}
		st, body = b.get("/_x/runs?from=2000-01-01T00:00&to=2001-01-01T00:00")
		want(t, "time filter", st, body, http.StatusOK, "No runs match.")

		// Keyset pages: three pages of 3 cover the 8 runs once each, newest first.
		var seen []string
		next := "/_x/runs?limit=3"
		idRe := regexp.MustCompile(`<td class="id"><a href="/_x/runs/([^"]+)">`)
		olderRe := regexp.MustCompile(`id="older" href="([^"]+)"`)
		for next != "" {
			st, body = b.get(next)
			want(t, "page "+next, st, body, http.StatusOK)
			for _, m := range idRe.FindAllStringSubmatch(body, -1) {
				seen = append(seen, m[1])
			}
			next = ""
			if m := olderRe.FindStringSubmatch(body); m != nil {
				next = strings.ReplaceAll(m[1], "&amp;", "&")
			}
		}
		if len(seen) != len(runs) || !slices.IsSortedFunc(seen, func(a, b string) int { return strings.Compare(b, a) }) {
			t.Errorf("paging saw %v, want the %d runs once each, newest first", seen, len(runs))
		}

		st, body = b.get("/_x/runs/" + runs[store.StateFailed])
		want(t, "run detail", st, body, http.StatusOK, "X_BAD_REQUEST", "card declined", "reserve", "charge",
			"RunStarted", "StepCompleted", "AttemptFailed", "RunFailed", "Stop reason", `name="fromStep"`, `id="retry"`,
			"&#34;reserve:order-fail&#34;", "order-fail")
		st, body = b.get("/_x/runs/" + runs[store.StateBlocked])
		want(t, "blocked run", st, body, http.StatusOK, "X_REPLAY_DIVERGED", "RunBlocked", "import-2", "globex", "seed",
			"&#34;note&#34;: &#34;manual run&#34;")
		st, body = b.get("/_x/runs/" + runs[store.StateSuspended])
		want(t, "suspended run", st, body, http.StatusOK, "TimerStarted", "sleeping", `id="cancel"`)
		if strings.Contains(body, `id="retry"`) {
			t.Error("a suspended run offers a retry")
		}
		st, body = b.get("/_x/runs/" + runs[store.StateDelayed])
		want(t, "delayed run", st, body, http.StatusOK, "<dt>Due</dt>", "in 1h")

		st, body = b.get("/_x/dead-letters")
		want(t, "dead letters", st, body, http.StatusOK, runs[store.StateFailed], "X_BAD_REQUEST")
		if strings.Contains(body, runs[store.StateBlocked]) {
			t.Error("dead letters lists the blocked run")
		}
	})
}

// Bad input is a clear refusal with an X_ code, never a 5xx.
func TestRefusals(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		runs := seed(t, env)
		b := newBrowser(t, serve(t, env, ""))
		for _, c := range []struct {
			path   string
			status int
			code   string
		}{
			{"/_x/runs?state=bogus", 400, "X_BAD_REQUEST"},
			{"/_x/runs?from=yesterday", 400, "X_BAD_REQUEST"},
			{"/_x/runs?from=2026-02-01T00:00&to=2026-01-01T00:00", 400, "X_BAD_REQUEST"},
			{"/_x/runs?limit=100000", 400, "X_BAD_REQUEST"},
			// The page by the API's rule (package paging): 0 is no page size, and a cursor is
			// a run id, not text that would silently answer the first page.
			{"/_x/runs?limit=0", 400, "X_BAD_REQUEST"},
			{"/_x/runs?before=zz", 400, "X_BAD_REQUEST"},
			{"/_x/runs?before=garbage&state=ready", 400, "X_BAD_REQUEST"},
			{"/_x/dead-letters?before=zz", 400, "X_BAD_REQUEST"},
			{"/_x/runs?q=%00", 400, "X_BAD_REQUEST"},
			{"/_x/runs?job=%ff", 400, "X_BAD_REQUEST"},
			{"/_x/runs/no-such-run", 404, "X_RUN_NOT_FOUND"},
			{"/_x/runs/%00", 400, "X_BAD_REQUEST"},
			{"/_x/nowhere", 404, "X_ROUTE_NOT_FOUND"},
		} {
			st, body := b.get(c.path)
			want(t, c.path, st, body, c.status, c.code)
		}
		_, page := b.get("/_x/runs/" + runs[store.StateFailed])
		token := csrf(t, page)
		for _, c := range []struct {
			path   string
			form   url.Values
			status int
			code   string
		}{
			{"/_x/runs/" + runs[store.StateCompleted] + "/cancel", url.Values{}, 409, "X_JOB_NOT_CANCELLABLE"},
			{"/_x/runs/" + runs[store.StateReady] + "/retry", url.Values{}, 409, "X_JOB_NOT_RETRYABLE"},
			{"/_x/runs/" + runs[store.StateFailed] + "/retry", url.Values{"fromStep": {"nope"}}, 404, "X_STEP_NOT_FOUND"},
			{"/_x/runs/no-such-run/cancel", url.Values{}, 404, "X_RUN_NOT_FOUND"},
			{"/_x/runs/" + runs[store.StateReady] + "/cancel", url.Values{"reason": {strings.Repeat("x", 2000)}}, 400, "X_BAD_REQUEST"},
		} {
			c.form.Set("csrf", token)
			id := strings.Split(c.path, "/")[3]
			before := 0
			if id != "no-such-run" {
				before = len(env.History(id))
			}
			st, body, _ := b.post(c.path, c.form)
			want(t, "POST "+c.path, st, body, c.status, c.code)
			if id != "no-such-run" && len(env.History(id)) != before {
				t.Errorf("POST %s was refused and still changed the history", c.path)
			}
		}
	})
}

// A long history renders its newest events, with a way to all of them.
func TestLongHistoryIsCapped(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	ctx := context.Background()
	res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "long", Queue: "long", Key: "l", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Declare(t, env.Engine, "w", testenv.Untyped("long", "long"))
	tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"long"}, Max: 1})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("poll: %v %v", tasks, err)
	}
	seq := tasks[0].LastSeq
	for from := 0; from < 1200; from += 400 { // records of 400 steps: a record carries at most frontend.MaxRecordCommands
		var cmds []frontend.Command
		for i := from; i < from+400; i++ {
			cmds = append(cmds, frontend.Command{Kind: frontend.CmdStep, Name: fmt.Sprintf("s%04d", i)})
		}
		resp, err := env.Engine.Record(ctx, frontend.RecordRequest{RunID: res.RunID, Fence: tasks[0].Fence, WorkerID: "w", LeaseToken: tasks[0].LeaseToken,
			AfterSeq: seq, Commands: cmds})
		if err != nil {
			t.Fatal(err)
		}
		seq = resp.LastSeq
	}
	b := newBrowser(t, serve(t, env, ""))
	st, body := b.get("/_x/runs/" + res.RunID)
	want(t, "long run", st, body, http.StatusOK, "1201 events", `id="truncated"`, "s1199")
	if strings.Count(body, `<li class="k-`) != 1000 {
		t.Errorf("the page renders %d events, want the newest 1000", strings.Count(body, `<li class="k-`))
	}
	st, body = b.get("/_x/runs/" + res.RunID + "?history=all")
	want(t, "long run, all", st, body, http.StatusOK, "RunStarted")
	if strings.Count(body, `<li class="k-`) != 1201 || strings.Contains(body, `id="truncated"`) {
		t.Errorf("?history=all renders %d events", strings.Count(body, `<li class="k-`))
	}
}

// Whatever a caller put in a run (a key, a tenant, an input, an error) is shown as text, never
// as markup.
func TestHostileValuesAreEscaped(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	ctx := context.Background()
	evil := `<script>alert(1)</script>`
	in, _ := jobs.Encode(map[string]string{"html": evil})
	res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "j" + evil, Queue: "q" + evil, Key: "k" + evil,
		Tenant: "t" + evil, EnqueuedBy: "by" + evil, Input: in})
	if err != nil {
		t.Fatal(err)
	}
	// A worker's manifest is caller input too.
	testenv.Declare(t, env.Engine, "w"+evil, testenv.Untyped("j"+evil, "q"+evil))
	b := newBrowser(t, serve(t, env, ""))
	for _, p := range []string{"/_x/", "/_x/runs", "/_x/runs/" + res.RunID, "/_x/runs?q=k" + url.QueryEscape(evil), "/_x/manifest",
		"/_x/backfills?env=e" + url.QueryEscape(evil)} {
		st, body := b.get(p)
		want(t, p, st, body, http.StatusOK, "&lt;script&gt;alert(1)&lt;/script&gt;")
		if strings.Contains(body, evil) {
			t.Errorf("%s renders a caller's value as markup", p)
		}
	}
}

// An unknown page is 404 X_ROUTE_NOT_FOUND and a wrong method 405 X_METHOD_NOT_ALLOWED with
// Allow, as on the API, rendered as the console's error page (it was a 400 X_BAD_REQUEST).
func TestUnknownRoutesAndMethods(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	b := newBrowser(t, serve(t, env, ""))
	for _, c := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{http.MethodGet, "/_x/nosuch", 404, "X_ROUTE_NOT_FOUND", ""},
		{http.MethodPost, "/_x/nosuch", 404, "X_ROUTE_NOT_FOUND", ""},
		{http.MethodGet, "/_x/runs/x/nosuch", 404, "X_ROUTE_NOT_FOUND", ""},
		{http.MethodDelete, "/_x/runs/x", 405, "X_METHOD_NOT_ALLOWED", "GET, HEAD"},
		{http.MethodPost, "/_x/runs", 405, "X_METHOD_NOT_ALLOWED", "GET, HEAD"},
		{http.MethodGet, "/_x/runs/x/cancel", 405, "X_METHOD_NOT_ALLOWED", "POST"},
		{http.MethodGet, "/_x/logout", 405, "X_METHOD_NOT_ALLOWED", "POST"},
	} {
		req, _ := http.NewRequest(c.method, b.base+c.path, nil)
		st, body, h := b.do(req)
		what := c.method + " " + c.path
		want(t, what, st, body, c.status, c.code, "Back to the overview")
		if got := h.Get("Allow"); got != c.allow {
			t.Errorf("%s: Allow %q, want %q", what, got, c.allow)
		}
		if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("%s: Content-Type %q, want the console's error page", what, ct)
		}
	}
}
