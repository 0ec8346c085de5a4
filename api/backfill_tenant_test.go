package api_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/store"
)

// GET /v1/backfills selects a tenant's passes (tenant=) or the passes of no tenant
// (notenant=true), and the client sends both: a per-tenant backfill's ledger is per (name,
// tenant), and the command line gates a tenant's pass on that tenant's passes alone. Before, the
// route and the client dropped both and every reader saw every tenant's passes.
func TestBackfillListFiltersByTenant(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{Token: "admin", Credentials: []api.Credential{{Token: "org-a-viewer", Role: api.RoleViewer, Tenant: "org-a"}}})
	ctx := t.Context()
	at := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	for i, row := range []struct{ run, tenant string }{{"run-a", "org-a"}, {"run-b", "org-b"}, {"run-all", ""}} {
		start := at.Add(time.Duration(i) * time.Second)
		if _, _, err := b.env.Store.BackfillOpen(ctx, store.Backfill{RunID: row.run, Name: "sweep", Tenant: row.tenant, Checksum: "c",
			Total: -1, StartedAt: start, UpdatedAt: start}); err != nil {
			t.Fatal(err)
		}
		if err := b.env.Store.BackfillFinish(ctx, store.BackfillFinish{BackfillProgress: store.BackfillProgress{RunID: row.run, Rows: 3,
			Batches: 1, Now: start}, Status: store.BackfillCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	runs := func(ps []backfill.Progress) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.RunID+"@"+p.Tenant)
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		f    store.BackfillFilter
		want []string
	}{
		{store.BackfillFilter{Name: "sweep"}, []string{"run-a@org-a", "run-all@", "run-b@org-b"}},
		{store.BackfillFilter{Name: "sweep", Tenant: "org-a"}, []string{"run-a@org-a"}},
		{store.BackfillFilter{Tenant: "org-b", Status: backfill.StatusCompleted}, []string{"run-b@org-b"}},
		{store.BackfillFilter{Name: "sweep", NoTenant: true}, []string{"run-all@"}},
		// NoTenant is ignored when Tenant is set (store.BackfillFilter): the client sends the tenant.
		{store.BackfillFilter{Name: "sweep", Tenant: "org-b", NoTenant: true}, []string{"run-b@org-b"}},
		{store.BackfillFilter{Name: "sweep", Tenant: "org-c"}, nil},
	} {
		ps, err := b.client.Backfills(ctx, c.f)
		if err != nil {
			t.Fatalf("Backfills(%+v): %v", c.f, err)
		}
		if got := runs(ps); !slices.Equal(got, c.want) {
			t.Errorf("Backfills(%+v) = %v; want %v", c.f, got, c.want)
		}
	}

	get := func(q, token string) (int, []byte) {
		st, _, out := b.call(t, http.MethodGet, "/v1/backfills?"+q, "", token, nil)
		return st, out
	}
	if st, out := get("notenant=false", "admin"); st != http.StatusOK {
		t.Errorf("notenant=false = %d %s; want 200", st, out)
	}
	for _, q := range []string{"tenant=%ff", "tenant=a%00b", "notenant=yes", "notenant=1", "notenant=TRUE", "tenant=org-a&notenant=true"} {
		if st, out := get(q, "admin"); st != http.StatusBadRequest || jsonCode(t, out) != jobs.CodeBadRequest {
			t.Errorf("GET /v1/backfills?%s = %d %s; want 400 X_BAD_REQUEST", q, st, out)
		}
	}
	// The ledger route still spans every tenant for a tenant-scoped credential (api/auth.go),
	// even asked for its own tenant's passes.
	if st, out := get("tenant=org-a", "org-a-viewer"); st != http.StatusForbidden || jsonCode(t, out) != jobs.CodeForbidden {
		t.Errorf("a tenant-scoped viewer's GET /v1/backfills?tenant=org-a = %d %s; want 403 X_FORBIDDEN", st, out)
	}
}
