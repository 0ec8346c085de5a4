package ui_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// With a token configured, the console is closed until the login form takes the token; a
// session cookie (HttpOnly, SameSite=Strict) then opens it, and every action needs the
// session's CSRF token.
func TestLoginSessionAndCSRF(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	runs := seed(t, env)
	base := serve(t, env, "s3cret")
	b := newBrowser(t, base)
	ready := runs[store.StateReady]

	for _, p := range []string{"/_x/", "/_x/runs", "/_x/runs/" + ready, "/_x/dead-letters"} {
		st, body := b.get(p)
		want(t, "anonymous GET "+p, st, body, http.StatusUnauthorized, "X_UNAUTHORIZED", `name="token"`)
		if strings.Contains(body, ready) {
			t.Errorf("anonymous GET %s shows a run", p)
		}
	}
	st, body, _ := b.post("/_x/runs/"+ready+"/cancel", url.Values{})
	want(t, "anonymous cancel", st, body, http.StatusUnauthorized, "X_UNAUTHORIZED")
	st, body, _ = b.post("/_x/login", url.Values{"token": {"guess"}})
	want(t, "wrong token", st, body, http.StatusUnauthorized, "X_UNAUTHORIZED")
	if env.Await(ready, store.StateReady).State != store.StateReady {
		t.Fatal("a refused request changed the run")
	}

	st, body, h := b.post("/_x/login", url.Values{"token": {"s3cret"}})
	want(t, "login", st, body, http.StatusSeeOther)
	cookie := h.Get("Set-Cookie")
	for _, attr := range []string{"jobs_session=", "HttpOnly", "SameSite=Strict", "Path=/_x/"} {
		if !strings.Contains(cookie, attr) {
			t.Errorf("session cookie %q lacks %s", cookie, attr)
		}
	}
	if strings.Contains(cookie, "s3cret") {
		t.Error("the session cookie holds the token")
	}
	st, page := b.get("/_x/runs/" + ready)
	want(t, "logged in", st, page, http.StatusOK, ready, "Log out")

	// An action without the CSRF token, or with another session's, is refused and changes nothing.
	other := newBrowser(t, base)
	other.post("/_x/login", url.Values{"token": {"s3cret"}})
	_, otherPage := other.get("/_x/runs/" + ready)
	for _, tok := range []string{"", "forged", csrf(t, otherPage)} {
		st, body, _ = b.post("/_x/runs/"+ready+"/cancel", url.Values{"csrf": {tok}})
		want(t, "cancel with csrf "+tok, st, body, http.StatusForbidden, "X_FORBIDDEN")
	}
	if got := env.Await(ready, store.StateReady); got.State != store.StateReady {
		t.Fatal("a refused cancel changed the run")
	}
	// A cross-site form post is refused by the server before the console sees it.
	st, body, _ = b.post("/_x/runs/"+ready+"/cancel", url.Values{"csrf": {csrf(t, page)}}, "Origin", "https://evil.example")
	if st != http.StatusUnauthorized || !strings.Contains(body, "X_UNAUTHORIZED") {
		t.Errorf("cross-site cancel: %d %.200s", st, body)
	}

	// A reason that fits the engine's 1,000 bytes alone but not with the console's note of who
	// acted is refused in the console's words, and changes nothing.
	st, body, _ = b.post("/_x/runs/"+ready+"/cancel", url.Values{"csrf": {csrf(t, page)}, "reason": {strings.Repeat("r", 995)}})
	want(t, "cancel with a 995-byte reason", st, body, http.StatusBadRequest, "X_BAD_REQUEST", "the console takes at most")
	if got := env.Await(ready, store.StateReady); got.State != store.StateReady {
		t.Fatal("a refused cancel changed the run")
	}

	st, body, h = b.post("/_x/runs/"+ready+"/cancel", url.Values{"csrf": {csrf(t, page)}, "reason": {"duplicate order"}})
	want(t, "cancel", st, body, http.StatusSeeOther)
	if loc := h.Get("Location"); loc != "/_x/runs/"+ready+"?notice=cancelled" {
		t.Errorf("cancel redirects to %q", loc)
	}
	env.Await(ready, store.StateCancelled)
	evs := env.History(ready)
	last := evs[len(evs)-1]
	p, _ := last.Decode()
	if c, ok := p.(history.RunCancelled); !ok || !strings.Contains(c.Reason, "duplicate order") {
		t.Errorf("last event %s %+v, want RunCancelled with the reason", last.Kind, p)
	}

	// A bearer request (a script) needs no CSRF token: no browser sends that header by itself.
	failed := runs[store.StateFailed]
	st, body, _ = b.post("/_x/runs/"+failed+"/retry", url.Values{"fromStep": {"charge"}}, "Authorization", "Bearer s3cret")
	want(t, "bearer retry", st, body, http.StatusSeeOther)
	if !slices.Contains(kinds(t, env, failed), history.KindRunRetried) {
		t.Error("the retry is not in the history")
	}
	st, body, _ = b.post("/_x/runs/"+failed+"/retry", url.Values{}, "Authorization", "Bearer wrong")
	want(t, "wrong bearer", st, body, http.StatusUnauthorized, "X_UNAUTHORIZED")

	// Logging out ends the session.
	_, page = b.get("/_x/")
	st, body, _ = b.post("/_x/logout", url.Values{"csrf": {csrf(t, page)}})
	want(t, "logout", st, body, http.StatusSeeOther)
	st, body = b.get("/_x/")
	want(t, "after logout", st, body, http.StatusUnauthorized, "X_UNAUTHORIZED")
}

// Without a token the console is open, as the API is, but its actions still need the CSRF
// token of the anonymous session the first page handed out.
func TestOpenConsoleStillNeedsCSRF(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	runs := seed(t, env)
	b := newBrowser(t, serve(t, env, ""))
	ready := runs[store.StateReady]
	st, page := b.get("/_x/runs/" + ready)
	want(t, "open console", st, page, http.StatusOK, ready)
	if strings.Contains(page, "Log out") {
		t.Error("an open console offers to log out")
	}
	st, body, _ := b.post("/_x/runs/"+ready+"/cancel", url.Values{})
	want(t, "cancel without csrf", st, body, http.StatusForbidden, "X_FORBIDDEN")
	fresh := newBrowser(t, b.base) // another visitor, with no session yet
	st, body, _ = fresh.post("/_x/runs/"+ready+"/cancel", url.Values{"csrf": {csrf(t, page)}})
	want(t, "cancel with another session's csrf", st, body, http.StatusForbidden, "X_FORBIDDEN")
	env.Await(ready, store.StateReady)
	st, body, _ = b.post("/_x/runs/"+ready+"/cancel", url.Values{"csrf": {csrf(t, page)}})
	want(t, "cancel", st, body, http.StatusSeeOther)
	env.Await(ready, store.StateCancelled)
	// A page requested by a host name, not an address, is refused (DNS rebinding), as the API is.
	req, _ := http.NewRequest(http.MethodGet, b.base+"/_x/", nil)
	req.Host = "evil.example"
	st, body, _ = b.do(req)
	if st != http.StatusUnauthorized || !strings.Contains(body, "X_UNAUTHORIZED") {
		t.Errorf("by host name: %d %.200s", st, body)
	}
	// The login form has nothing to do on an open console.
	st, _ = b.get("/_x/login")
	want(t, "login on an open console", st, "", http.StatusSeeOther)
}
