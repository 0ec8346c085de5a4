package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

type orgInput struct {
	N string `json:"n"`
	T string `json:"t"`
}

// A credential scoped to a tenant sees a run's links only to that tenant's runs. A parent may
// start a child for another tenant (a child's tenant is its own input's), and the parent's view
// listed that child's id, job and live state, as the child's view did its parent's, though the
// same credential is told either run is not found when it asks for it.
func TestATenantSeesNoLinkToAnotherTenantsRun(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{Token: "admin", Credentials: []api.Credential{
		{Token: "acme-tok", Role: api.RoleViewer, Tenant: "acme"},
		{Token: "other-tok", Role: api.RoleViewer, Tenant: "other"}}})
	key := func(i orgInput) string { return i.N }
	byInput := jobs.TenantFrom(func(i orgInput) string { return i.T })
	sleeper := jobs.MustDefine("nap", key, byInput, func(c *jobs.Ctx, i orgInput) (int, error) {
		return 1, jobs.Sleep(c, "nap", 2*time.Hour)
	})
	parent := jobs.MustDefine("fan", key, byInput, func(c *jobs.Ctx, i orgInput) (int, error) {
		if _, err := sleeper.StartChild(c, "theirs", orgInput{N: i.N + "-theirs", T: "other"}); err != nil {
			return 0, err
		}
		if _, err := sleeper.StartChild(c, "ours", orgInput{N: i.N + "-ours", T: i.T}); err != nil {
			return 0, err
		}
		return 1, jobs.Sleep(c, "wait", 3*time.Hour)
	})
	b.env.Worker(worker.Config{}, sleeper, parent)
	res, err := parent.Enqueue(t.Context(), b.env.Engine, orgInput{N: "p", T: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	b.env.Await(res.RunID, store.StateSuspended)
	full, err := b.env.Engine.InspectRun(t.Context(), res.RunID)
	if err != nil || len(full.Children) != 2 {
		t.Fatalf("the parent's children: %+v, %v", full.Children, err)
	}
	view := func(id, token string) engine.RunView {
		t.Helper()
		st, _, body := b.call(t, http.MethodGet, "/v1/runs/"+id, "", token, nil)
		if st != http.StatusOK {
			t.Fatalf("GET %s as %s: %d %s", id, token, st, body)
		}
		var v engine.RunView
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := view(res.RunID, "acme-tok")
	if len(v.Children) != 1 || v.Children[0].Name != "ours" {
		t.Fatalf("acme sees the children %+v; want only its own", v.Children)
	}
	if v := view(res.RunID, "admin"); len(v.Children) != 2 {
		t.Fatalf("an unscoped credential sees %d children; want both", len(v.Children))
	}
	for _, c := range full.Children {
		if c.Name != "theirs" {
			continue
		}
		b.env.Await(c.RunID, store.StateSuspended)
		v := view(c.RunID, "other-tok")
		if v.Parent != nil || v.EnqueuedBy != "run" {
			t.Fatalf("the other tenant sees its run's parent %+v, enqueued by %q; want neither", v.Parent, v.EnqueuedBy)
		}
		if st, _, _ := b.call(t, http.MethodGet, "/v1/runs/"+res.RunID, "", "other-tok", nil); st != http.StatusNotFound {
			t.Fatalf("the other tenant asks for the parent: %d; want 404", st)
		}
	}
}
