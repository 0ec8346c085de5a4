package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
)

// TestResultLongPollAndWhoAmI: GET /v1/runs/{id}/result answers done false when the wait passes,
// the outcome once the run finished (JSON for people, msgpack for the client), and refuses a bad
// wait; a tenant-scoped credential does not see another tenant's run; /v1/whoami names the
// credential's role.
func TestResultLongPollAndWhoAmI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, api.Config{Credentials: []api.Credential{{Token: "v", Role: api.RoleViewer},
		{Token: "acme", Role: api.RoleViewer, Tenant: "acme"}, {Token: "op", Role: api.RoleOperator},
		{Token: "acme-op", Role: api.RoleOperator, Tenant: "acme"}, {Token: "w", Role: api.RoleWorker}}})
	res, err := b.env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "later", Key: "k", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	st, _, out := b.call(t, http.MethodGet, "/v1/runs/"+res.RunID+"/result?wait=50ms", "", "v", nil)
	var rr engine.RunResult
	if st != http.StatusOK || json.Unmarshal(out, &rr) != nil || rr.Done || rr.State != store.StateReady {
		t.Fatalf("a pending run's long-poll = %d %s", st, out)
	}
	if st, _, out := b.call(t, http.MethodGet, "/v1/runs/"+res.RunID+"/result?wait=soon", "", "v", nil); st != http.StatusBadRequest ||
		!strings.Contains(string(out), "X_BAD_REQUEST") {
		t.Fatalf("a bad wait = %d %s", st, out)
	}
	if st, _, out := b.call(t, http.MethodGet, "/v1/runs/"+res.RunID+"/result", "", "acme", nil); st != http.StatusNotFound {
		t.Fatalf("another tenant's run = %d %s", st, out)
	}
	// A cancel while a client waits: the wait ends with the outcome.
	c, err := api.NewClient(b.url, "op", api.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() { _, err := c.WaitResult(ctx, res.RunID); done <- err }()
	time.Sleep(50 * time.Millisecond)
	if _, err := c.Cancel(ctx, res.RunID, "changed my mind"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if jobs.CodeOf(err) != jobs.CodeRunCancelled || !strings.Contains(err.Error(), "changed my mind") {
			t.Fatalf("WaitResult of a cancelled run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitResult did not return after the cancel")
	}
	st, _, out = b.call(t, http.MethodGet, "/v1/runs/"+res.RunID+"/result", "", "v", nil)
	if st != http.StatusOK || json.Unmarshal(out, &rr) != nil || !rr.Done || rr.Error == nil || rr.Error.Code != jobs.CodeRunCancelled {
		t.Fatalf("a cancelled run's result = %d %s", st, out)
	}
	// Any valid credential may ask who it is: a tenant-scoped one and a worker's too.
	for token, want := range map[string]api.Identity{"v": {Role: api.RoleViewer}, "op": {Role: api.RoleOperator},
		"acme": {Role: api.RoleViewer, Tenant: "acme"}, "acme-op": {Role: api.RoleOperator, Tenant: "acme"},
		"w": {Role: api.RoleWorker}} {
		c, err := api.NewClient(b.url, token)
		if err != nil {
			t.Fatal(err)
		}
		id, err := c.WhoAmI(ctx)
		c.Close()
		if err != nil || id != want {
			t.Fatalf("whoami(%s) = %+v, %v", token, id, err)
		}
	}
	// An unknown token is no credential: it learns nothing.
	if st, _, out := b.call(t, http.MethodGet, "/v1/whoami", "", "nope", nil); st != http.StatusUnauthorized {
		t.Fatalf("whoami with an unknown token = %d %s", st, out)
	}
}
