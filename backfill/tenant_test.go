package backfill_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// A per-tenant backfill is swept tenant by tenant, and each tenant's pass stands on its own: its
// own live pass (the idempotency key holds the tenant), its own ledger row, gate and pending
// state, and a count of its own rows. With the ledger keyed by name, the second tenant's pass
// completed at once as skipped (its rows never handled); with the key the name, its enqueue was
// refused while the first tenant's pass was live; with an unscoped count, every pass failed
// X_BACKFILL_STALLED while another tenant had rows left.
func TestPerTenantPassesKeepALedgerAndALivePassPerTenant(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		tb := newTable(10) // org-0: the even ids, org-1: the odd ones
		gate := make(chan struct{})
		handle := func(ctx context.Context, bt backfill.Batch[row]) error {
			<-gate
			return tb.handle(ctx, bt)
		}
		b := backfill.MustDefine("per-org-ledger", backfill.PerTenant(), tb.source(), handle, backfill.BatchSize(2),
			backfill.Rate(1e6), backfill.CountFor(tb.leftOf))
		startWorker(env, "", b)
		org0 := enqueue(t, env, b, backfill.Input{Tenant: "org-0"})
		org1 := enqueue(t, env, b, backfill.Input{Tenant: "org-1"}) // while org-0's pass is live
		if org1.Deduped || org1.RunID == org0.RunID {
			t.Fatalf("org-1's enqueue = %+v; want a pass of its own beside org-0's %s", org1, org0.RunID)
		}
		if again := enqueue(t, env, b, backfill.Input{Tenant: "org-0"}); !again.Deduped || again.RunID != org0.RunID {
			t.Fatalf("org-0's enqueue again = %+v; want its live pass %s", again, org0.RunID)
		}
		close(gate)
		for tenant, id := range map[string]string{"org-0": org0.RunID, "org-1": org1.RunID} {
			out := result(t, b, env.Await(id, store.StateCompleted))
			if out.Skipped || out.Rows != 5 {
				t.Fatalf("%s's pass = %+v; want its 5 rows swept", tenant, out)
			}
		}
		for id, r := range tb.rows {
			if !r.Done || tb.handled[id] != 1 {
				t.Fatalf("row %d (%s): done %v, handled %d times; want every row once", id, r.Tenant, r.Done, tb.handled[id])
			}
		}
		rows := ledger(t, env, "per-org-ledger")
		if len(rows) != 2 {
			t.Fatalf("ledger = %+v; want a row per tenant", rows)
		}
		for _, r := range rows {
			want := map[string]string{org0.RunID: "org-0", org1.RunID: "org-1"}[r.RunID]
			if r.Tenant != want || r.Status != backfill.StatusCompleted || r.Total != 5 || r.Rows != 5 {
				t.Fatalf("ledger row = %+v; want %s's, completed, its 5 rows counted at the start", r, want)
			}
		}

		// A tenant whose pass completed is a no-op until forced; the skip names its own pass.
		skip := enqueue(t, env, b, backfill.Input{Tenant: "org-0"})
		if out := result(t, b, env.Await(skip.RunID, store.StateCompleted)); !out.Skipped || out.PreviousRunID != org0.RunID {
			t.Fatalf("org-0 again = %+v; want skipped, previous %s", out, org0.RunID)
		}

		rep, err := env.Engine.PendingBackfills(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		want := []backfill.TenantState{{Tenant: "org-0", State: backfill.StateCompleted, RunID: org0.RunID},
			{Tenant: "org-1", State: backfill.StateCompleted, RunID: org1.RunID}}
		if len(rep.Rows) != 1 || rep.Rows[0].State != backfill.StateCompleted || !reflect.DeepEqual(rep.Rows[0].Tenants, want) {
			t.Fatalf("pending report = %+v; want completed for org-0 and org-1", rep.Rows)
		}
		if got := rep.TenantState("per-org-ledger", "org-2"); got != backfill.StatePending {
			t.Fatalf("a tenant with no pass reads %q; want pending", got)
		}

		// The engine keeps a pass's row under its run's tenant, and the pages sweep the input's:
		// the two are the same because a run enqueued by hand under another tenant than its
		// input's never runs its body (the job refuses it).
		req, err := b.Request(backfill.Input{Tenant: "org-1", Force: true})
		if err != nil {
			t.Fatal(err)
		}
		req.Tenant, req.Key = "org-0", "by-hand"
		res, err := env.Engine.Enqueue(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if run := env.Await(res.RunID, store.StateFailed); run.ErrorCode != string(jobs.CodeJobTenantMismatch) {
			t.Fatalf("a run of tenant org-0 for org-1's input: %s %s; want X_JOB_TENANT_MISMATCH", run.ErrorCode, run.Error)
		}
		if rows := ledger(t, env, "per-org-ledger"); len(rows) != 2 {
			t.Fatalf("the refused run wrote a ledger row: %+v", rows)
		}
	})
}

// The idempotency key of a pass: the name for a backfill of every tenant, the name and the tenant
// for a per-tenant one, and Declaration.Key says the same (the CLI enqueues with it).
func TestAPerTenantPassIsKeyedByItsTenant(t *testing.T) {
	t.Parallel()
	b := backfill.MustDefine("keyed-org", backfill.PerTenant(), nopSource(), nopHandle)
	for _, tenant := range []string{"org-a", "org-b"} {
		req, err := b.Request(backfill.Input{Tenant: tenant})
		if err != nil || req.Key != "keyed-org/"+tenant || req.Tenant != tenant || req.Key != b.Declaration().Key(tenant) {
			t.Fatalf("request for %s = %+v, %v; want key keyed-org/%s", tenant, req, err, tenant)
		}
	}
	all := backfill.MustDefine("keyed-all", backfill.AllTenants(), nopSource(), nopHandle)
	if k := all.Declaration().Key("ignored"); k != "keyed-all" {
		t.Fatalf("key of a backfill of every tenant = %q; want its name", k)
	}
}

func TestPendingIsPerTenantForAPerTenantBackfill(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	of := func(p backfill.Progress, tenant string) backfill.Progress { p.Tenant = tenant; return p }
	decls := []backfill.Declaration{
		{Name: "orgs", Checksum: "c-orgs", Tenant: "input"},
		{Name: "orgs-done", Checksum: "c-orgs-done", Tenant: "input"},
		{Name: "all", Checksum: "c-all", Tenant: "none"},
		{Name: "orgs-new", Checksum: "c-orgs-new", Tenant: "input"},
	}
	ledgerRows := []backfill.Progress{ // newest first
		of(progress("orgs", "r5", backfill.StatusFailed, at.Add(5*time.Hour)), "org-b"),
		of(progress("orgs-done", "r4", backfill.StatusCompleted, at.Add(4*time.Hour)), "org-b"),
		of(progress("all", "r3", backfill.StatusCompleted, at.Add(3*time.Hour)), "org-a"), // not a pass of no tenant
		of(progress("orgs", "r2", backfill.StatusCompleted, at.Add(2*time.Hour)), "org-a"),
		of(progress("orgs-done", "r1", backfill.StatusCompleted, at.Add(time.Hour)), "org-a"),
	}
	rep := backfill.Pending(decls, ledgerRows, "")
	states := map[string]backfill.PendingRow{}
	for _, r := range rep.Rows {
		states[r.Name] = r
	}
	if r := states["orgs"]; r.State != backfill.StateFailed || r.RunID != "r5" || !reflect.DeepEqual(r.Tenants, []backfill.TenantState{
		{Tenant: "org-a", State: backfill.StateCompleted, RunID: "r2"}, {Tenant: "org-b", State: backfill.StateFailed, RunID: "r5"}}) {
		t.Fatalf("orgs = %+v; want failed for org-b, completed for org-a", r)
	}
	if r := states["orgs-done"]; r.State != backfill.StateCompleted || len(r.Tenants) != 2 {
		t.Fatalf("orgs-done = %+v; want completed for both tenants", r)
	}
	if r := states["all"]; r.State != backfill.StatePending || r.Tenants != nil {
		t.Fatalf("all = %+v; want pending: a tenant's pass is no pass of every tenant", r)
	}
	if r := states["orgs-new"]; r.State != backfill.StatePending {
		t.Fatalf("orgs-new = %+v; want pending", r)
	}
	if !reflect.DeepEqual(rep.Pending, []string{"all", "orgs", "orgs-new"}) {
		t.Fatalf("pending = %v", rep.Pending)
	}
	for _, c := range []struct{ name, tenant, want string }{
		{"orgs", "org-a", backfill.StateCompleted}, {"orgs", "org-b", backfill.StateFailed}, {"orgs", "org-c", backfill.StatePending},
		{"orgs-new", "org-a", backfill.StatePending}, {"all", "", backfill.StatePending}, {"nothing", "org-a", ""},
	} {
		if got := rep.TenantState(c.name, c.tenant); got != c.want {
			t.Errorf("TenantState(%s, %s) = %q; want %q", c.name, c.tenant, got, c.want)
		}
	}
	// The gate names the tenant whose pass completed.
	done := of(progress("orgs", "r2", backfill.StatusCompleted, at), "org-a")
	if v := backfill.Gate(backfill.GateInput{Declaration: decls[0], Completed: &done}); v.Run() || !contains(v.Err.Message, `tenant "org-a"`) {
		t.Fatalf("gate = %v; want X_BACKFILL_APPLIED naming org-a", v.Err)
	}
}
