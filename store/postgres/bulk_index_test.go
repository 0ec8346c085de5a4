package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/ultimat3/jobs/store"
)

// TestTenantIndexSkipsUntenantedRuns: runs_tenant_id holds only runs with a tenant
// (014_bulk_indexes), so an untenanted run costs its insert no entry there, and the tenant
// search still reads it in id order, with the value unknown to the plan (a generic plan, as a
// prepared statement gets after a few executions) as well as known.
func TestTenantIndexSkipsUntenantedRuns(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{})
	ctx := context.Background()
	var def string
	if err := s.pool.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'runs_tenant_id'`,
		s.schema).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(def, "WHERE (tenant <> ''::text)") {
		t.Fatalf("runs_tenant_id is %q; want it partial on tenant <> ''", def)
	}
	query, args := s.searchSQL(store.RunQuery{ListParams: store.ListParams{Tenant: "t", Before: "x", Limit: 51}})
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off; SET LOCAL enable_bitmapscan = off; SET LOCAL plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		// A named statement, so that the plan cache mode applies: EXPLAIN EXECUTE shows the plan
		// the prepared search gets.
		if _, err := tx.Prepare(ctx, "tenant_search", query); err != nil {
			t.Fatal(err)
		}
		if len(args) != 3 {
			t.Fatalf("the tenant search takes %d arguments; want tenant, before, limit", len(args))
		}
		plan, err := planText(ctx, tx, "EXPLAIN EXECUTE tenant_search('t', 'x', 51)")
		_ = tx.Rollback(ctx)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if strings.Contains(plan, "Sort") || !strings.Contains(plan, "runs_tenant_id") {
			t.Errorf("%s: plan %q sorts its matches or does not read runs_tenant_id", mode, plan)
		}
	}
}
