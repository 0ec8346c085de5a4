package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// A console session is bound to the credentials as they are: its cookie carries the role its
// token had at login, so when a credential changes (an operator's token demoted to viewer, or
// scoped to a tenant, which may not use the console at all) the sessions opened before end, the
// first time the engine serves with the new credentials. They used to go on for their 12 hours
// with the old role: the session key was derived from the tokens alone. Credentials that did
// not change keep their sessions across a restart, in whatever order they are given.
func TestASessionEndsWhenItsCredentialChanges(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	const token = "sr-operator-token-0123456789"
	viewer := api.Credential{Token: "sr-viewer-token-0123456789", Role: api.RoleViewer}
	serveWith := func(creds ...api.Credential) string {
		srv, err := api.NewServer(api.Config{Engine: env.Engine, Credentials: creds, Logger: env.Logger})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		t.Cleanup(ts.Close)
		t.Cleanup(srv.Drain)
		return ts.URL
	}
	// The token is an operator's when its holder logs in.
	login := newBrowser(t, serveWith(api.Credential{Token: token, Role: api.RoleOperator}, viewer))
	st, body, _ := login.post("/_x/login", url.Values{"token": {token}})
	want(t, "login", st, body, http.StatusSeeOther)
	cookies := login.c.Jar.Cookies(mustParse(t, login.base+"/_x/"))
	if len(cookies) == 0 {
		t.Fatal("no session cookie after login")
	}

	for i, c := range []struct {
		what  string
		creds []api.Credential
		keeps bool // whether the session still acts
	}{
		{"unchanged, in another order", []api.Credential{viewer, {Token: token, Role: api.RoleOperator}}, true},
		{"demoted to viewer", []api.Credential{{Token: token, Role: api.RoleViewer}, viewer}, false},
		{"scoped to tenant acme", []api.Credential{{Token: token, Role: api.RoleOperator, Tenant: "acme"}, viewer}, false},
		{"removed", []api.Credential{viewer}, false},
	} {
		t.Run(c.what, func(t *testing.T) {
			// The engine serves with the new credentials; the browser keeps its cookie.
			b := newBrowser(t, serveWith(c.creds...))
			b.c.Jar.SetCookies(mustParse(t, b.base+"/_x/"), cookies)
			res, err := env.Engine.Enqueue(context.Background(), jobs.EnqueueRequest{Job: "import", Queue: "manual",
				Key: "sr-" + string(rune('a'+i)), NoTenant: true})
			if err != nil {
				t.Fatal(err)
			}
			st, page := b.get("/_x/runs/" + res.RunID)
			if !c.keeps {
				if st == http.StatusOK {
					t.Errorf("the session opened while the token was an operator's still shows the console (%d)", st)
				}
				// Whatever the page said, the cancel the old session posts is refused.
				st, body, _ := b.post("/_x/runs/"+res.RunID+"/cancel", url.Values{"csrf": {csrfOr(page)}})
				if run, _ := env.Engine.GetRun(context.Background(), res.RunID); run.State == store.StateCancelled {
					t.Errorf("the old session cancelled run %s (%d %.200s)", res.RunID, st, body)
				}
				return
			}
			want(t, "the run page", st, page, http.StatusOK, res.RunID)
			st, body, _ := b.post("/_x/runs/"+res.RunID+"/cancel", url.Values{"csrf": {csrf(t, page)}})
			if run, _ := env.Engine.GetRun(context.Background(), res.RunID); run.State != store.StateCancelled {
				t.Errorf("the session of an unchanged operator's token did not cancel: %d %.200s; run %s", st, body, run.State)
			}
		})
	}
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// csrfOr is the page's CSRF token, or a made-up one when the page carries none.
func csrfOr(page string) string {
	if m := csrfField.FindStringSubmatch(page); m != nil {
		return m[1]
	}
	return "none"
}
