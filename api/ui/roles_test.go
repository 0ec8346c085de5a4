package ui_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// The console takes the API's role credentials: a viewer's token looks and may not act, an
// operator's acts, and a worker's or a tenant-scoped token may not use the console at all.
func TestConsoleRoles(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	runs := seed(t, env)
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Credentials: []api.Credential{
		{Token: "view", Role: api.RoleViewer}, {Token: "op", Role: api.RoleOperator},
		{Token: "work", Role: api.RoleWorker}, {Token: "acme-op", Role: api.RoleOperator, Tenant: "acme"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)
	b := newBrowser(t, ts.URL)
	ready := runs[store.StateReady]

	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		st, body, _ := b.do(req)
		return st, body
	}
	st, body := get("/_x/runs/"+ready, "view")
	want(t, "a viewer looks", st, body, http.StatusOK, ready)
	st, body, _ = b.post("/_x/runs/"+ready+"/cancel", url.Values{}, "Authorization", "Bearer view")
	want(t, "a viewer cancels", st, body, http.StatusForbidden, "X_FORBIDDEN")
	if r, _ := env.Engine.GetRun(t.Context(), ready); r.State != store.StateReady {
		t.Fatalf("a viewer's refused cancel changed the run: %s", r.State)
	}
	for _, tok := range []string{"work", "acme-op", "nope"} {
		st, body = get("/_x/runs", tok)
		want(t, tok+" looks", st, body, http.StatusUnauthorized, "X_UNAUTHORIZED")
	}
	st, body, _ = b.post("/_x/runs/"+ready+"/cancel", url.Values{}, "Authorization", "Bearer op")
	if st != http.StatusSeeOther && st != http.StatusOK {
		t.Fatalf("an operator cancels: %d %.300s", st, body)
	}
	if r, _ := env.Engine.GetRun(t.Context(), ready); r.State != store.StateCancelled {
		t.Fatalf("an operator's cancel left the run %s", r.State)
	}
}

// A viewer may log out: logging out ends the browser's own session and acts on nothing, so it
// needs the session's CSRF token (another site must not end it) but not an operator's role.
func TestViewerLogsOut(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Credentials: []api.Credential{
		{Token: "view", Role: api.RoleViewer}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)
	b := newBrowser(t, ts.URL)
	st, body, _ := b.post("/_x/login", url.Values{"token": {"view"}})
	want(t, "a viewer logs in", st, body, http.StatusSeeOther)
	st, page := b.get("/_x/")
	want(t, "a viewer's page", st, page, http.StatusOK, "Log out")
	st, body, _ = b.post("/_x/logout", url.Values{"csrf": {"forged"}})
	want(t, "logout with a forged csrf", st, body, http.StatusForbidden, "X_FORBIDDEN")
	st, body = b.get("/_x/")
	want(t, "after a refused logout", st, body, http.StatusOK)
	st, body, h := b.post("/_x/logout", url.Values{"csrf": {csrf(t, page)}})
	want(t, "a viewer logs out", st, body, http.StatusSeeOther)
	if loc := h.Get("Location"); loc != "/_x/login" {
		t.Errorf("logout redirects to %q", loc)
	}
	st, body = b.get("/_x/")
	want(t, "after logout", st, body, http.StatusUnauthorized, "X_UNAUTHORIZED")
}
