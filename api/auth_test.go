package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

var roles = []api.Credential{
	{Token: "w-tok", Role: api.RoleWorker},
	{Token: "o-tok", Role: api.RoleOperator},
	{Token: "v-tok", Role: api.RoleViewer},
	{Token: "acme-tok", Role: api.RoleOperator, Tenant: "acme"},
	{Token: "acme-view", Role: api.RoleViewer, Tenant: "acme"},
}

// TestRolesSeparateWorkersOperatorsAndViewers: each credential does what its role allows and
// is refused (403 X_FORBIDDEN, nothing changed) the rest.
func TestRolesSeparateWorkersOperatorsAndViewers(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{Credentials: roles})
	ctx := context.Background()
	res, err := b.env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Queue: "q", Key: "k", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	enqueue := []byte(`{"job":"j","queue":"q","key":"k2","noTenant":true}`)
	cases := []struct {
		token, method, path string
		body                []byte
		status              int
	}{
		{"w-tok", http.MethodGet, "/v1/runs", nil, http.StatusForbidden},
		{"w-tok", http.MethodPost, "/v1/runs", enqueue, http.StatusForbidden},
		{"w-tok", http.MethodGet, "/metrics", nil, http.StatusForbidden},
		{"v-tok", http.MethodGet, "/v1/runs", nil, http.StatusOK},
		{"v-tok", http.MethodGet, "/v1/runs/" + res.RunID, nil, http.StatusOK},
		{"v-tok", http.MethodGet, "/v1/manifest", nil, http.StatusOK},
		{"v-tok", http.MethodGet, "/metrics", nil, http.StatusOK},
		{"v-tok", http.MethodPost, "/v1/runs/" + res.RunID + "/cancel", []byte(`{}`), http.StatusForbidden},
		{"v-tok", http.MethodPost, "/v1/runs", enqueue, http.StatusForbidden},
		{"v-tok", http.MethodPost, "/v1/worker/poll", nil, http.StatusForbidden},
		{"o-tok", http.MethodPost, "/v1/worker/heartbeat", nil, http.StatusForbidden},
		{"o-tok", http.MethodGet, "/v1/queues", nil, http.StatusOK},
		{"o-tok", http.MethodPost, "/v1/runs", enqueue, http.StatusCreated},
		{"nope", http.MethodGet, "/v1/runs", nil, http.StatusUnauthorized},
	}
	for _, c := range cases {
		ct := ""
		if c.method == http.MethodPost {
			ct = api.ContentJSON
			if strings.HasPrefix(c.path, "/v1/worker/") {
				ct = api.ContentMsgpack
			}
		}
		st, _, out := b.call(t, c.method, c.path, ct, c.token, c.body)
		if st != c.status {
			t.Errorf("%s %s with %s = %d %s, want %d", c.method, c.path, c.token, st, out, c.status)
		}
		if st == http.StatusForbidden && !strings.Contains(string(out), string(jobs.CodeForbidden)) {
			t.Errorf("%s %s with %s: %s, want X_FORBIDDEN", c.method, c.path, c.token, out)
		}
	}
	if run, _ := b.env.Engine.GetRun(ctx, res.RunID); run.State != store.StateReady {
		t.Fatalf("a refused cancel changed the run: %s", run.State)
	}
	// The worker credential runs the worker protocol.
	w, err := api.NewClient(b.url, "w-tok")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	testenv.Declare(t, w, "w", testenv.Untyped("j", "q"))
	if tasks, err := w.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 5}); err != nil || len(tasks) != 2 {
		t.Fatalf("a worker's poll: %d tasks, %v", len(tasks), err)
	}
}

// TestTenantScopedCredential: a credential scoped to a tenant sees and acts on its tenant's runs
// only.
func TestTenantScopedCredential(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{Credentials: roles})
	ctx := context.Background()
	mine, err := b.env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Queue: "q", Key: "a", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := b.env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Queue: "q", Key: "g", Tenant: "globex"})
	if err != nil {
		t.Fatal(err)
	}
	acme, err := api.NewClient(b.url, "acme-tok")
	if err != nil {
		t.Fatal(err)
	}
	defer acme.Close()
	page, err := acme.ListRuns(ctx, store.ListParams{})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].ID != mine.RunID {
		t.Fatalf("acme's listing: %+v %v", page.Runs, err)
	}
	if _, err := acme.ListRuns(ctx, store.ListParams{Tenant: "globex"}); !jobs.HasCode(err, jobs.CodeForbidden) {
		t.Fatalf("acme listing globex: %v", err)
	}
	if _, err := acme.GetRun(ctx, theirs.RunID); !jobs.HasCode(err, jobs.CodeRunNotFound) {
		t.Fatalf("acme reading globex's run: %v", err)
	}
	if _, err := acme.Cancel(ctx, theirs.RunID, "mine now"); !jobs.HasCode(err, jobs.CodeRunNotFound) {
		t.Fatalf("acme cancelling globex's run: %v", err)
	}
	if run, _ := b.env.Engine.GetRun(ctx, theirs.RunID); run.State != store.StateReady {
		t.Fatalf("globex's run was changed: %s", run.State)
	}
	if _, err := acme.Cancel(ctx, mine.RunID, "done"); err != nil {
		t.Fatalf("acme cancelling its own run: %v", err)
	}
	if _, err := acme.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Key: "x", Tenant: "globex"}); !jobs.HasCode(err, jobs.CodeForbidden) {
		t.Fatalf("acme enqueueing for globex: %v", err)
	}
	if _, err := acme.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Key: "x", NoTenant: true}); !jobs.HasCode(err, jobs.CodeForbidden) {
		t.Fatalf("acme enqueueing for no tenant: %v", err)
	}
	if _, err := acme.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Key: "x", Tenant: "acme"}); err != nil {
		t.Fatalf("acme enqueueing for itself: %v", err)
	}
	if _, err := acme.Publish(ctx, "paid", map[string]string{"order": "1"}); !jobs.HasCode(err, jobs.CodeForbidden) {
		t.Fatalf("acme publishing an event every tenant may wait for: %v", err)
	}
	if _, err := acme.Queues(ctx); !jobs.HasCode(err, jobs.CodeForbidden) {
		t.Fatalf("acme reading every tenant's queues: %v", err)
	}
	viewer, _ := api.NewClient(b.url, "acme-view")
	defer viewer.Close()
	if _, err := viewer.GetRun(ctx, mine.RunID); err != nil {
		t.Fatalf("acme's viewer reading acme's run: %v", err)
	}
	if _, err := viewer.Cancel(ctx, mine.RunID, ""); !jobs.HasCode(err, jobs.CodeForbidden) {
		t.Fatalf("acme's viewer cancelling: %v", err)
	}
}

// TestWithoutTokensOnlyLoopback: with no credential the engine answers loopback clients only,
// and refuses to listen beyond loopback unless told it may.
func TestWithoutTokensOnlyLoopback(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	for remote, want := range map[string]int{"10.1.2.3:4567": http.StatusUnauthorized, "127.0.0.1:4567": http.StatusOK, "[::1]:4567": http.StatusOK} {
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/v1/codes", nil)
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("from %s: %d %s, want %d", remote, rec.Code, rec.Body, want)
		}
	}
	open, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Addr: "0.0.0.0:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := open.Start(context.Background()); !jobs.HasCode(err, jobs.CodeUnauthorized) {
		_ = open.Stop(context.Background())
		t.Fatalf("a non-loopback listen without tokens: %v, want X_UNAUTHORIZED", err)
	}
	for _, cfg := range []api.Config{
		{Engine: env.Engine, Logger: env.Logger, Addr: "0.0.0.0:0", AllowUnauthenticated: true},
		{Engine: env.Engine, Logger: env.Logger, Addr: "0.0.0.0:0", Credentials: []api.Credential{{Token: "t", Role: api.RoleViewer}}},
	} {
		s, err := api.NewServer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatalf("%+v: %v", cfg.Credentials, err)
		}
		_ = s.Stop(context.Background())
	}
}

func TestParseCredential(t *testing.T) {
	t.Parallel()
	c, err := api.ParseCredential("operator@acme=s3cret")
	if err != nil || c != (api.Credential{Token: "s3cret", Role: api.RoleOperator, Tenant: "acme"}) {
		t.Fatalf("%+v %v", c, err)
	}
	for _, bad := range []string{"operator", "boss=x", "worker@acme=x", "viewer=", "viewer@a\x00b=x"} {
		if _, err := api.ParseCredential(bad); !jobs.HasCode(err, jobs.CodeBadRequest) {
			t.Errorf("%q: %v", bad, err)
		}
		if _, err := api.ParseCredential(bad); err != nil && strings.Contains(err.Error(), "=x") {
			t.Errorf("%q: the error shows the token: %v", bad, err)
		}
	}
}
