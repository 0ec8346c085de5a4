package postgres

import (
	"context"
	"testing"

	"github.com/ultimat3/jobs/store"
)

// A schema whose ledger rows were written before they carried a tenant upgrades in place: each
// row takes its run's tenant while the run is still there (the pass's tenant is its run's), a row
// whose run is gone keeps no tenant, and the rows of no tenant stay so. Without it, a per-tenant
// backfill's passes from before the upgrade would all read as passes of no tenant.
func TestBackfillTenantMigrationTakesEachRowsTenantFromItsRun(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{})
	ctx := context.Background()
	// The schema as the build before 019 left it, holding a per-tenant pass, a pass whose run
	// retention deleted, and a pass of no tenant.
	if _, err := s.pool.Exec(ctx, schemaReplacer(s.schema).Replace(`
ALTER TABLE {S}.backfills DROP COLUMN tenant;
DELETE FROM {S}.schema_migrations WHERE version = 19;
INSERT INTO {S}.runs (id, job, queue, key, tenant, no_tenant, state, created_at, updated_at) VALUES
	('run-a', 'orgs', 'q', 'orgs', 'org-a', false, 'completed', now(), now()),
	('run-all', 'all', 'q', 'all', '', true, 'completed', now(), now());
INSERT INTO {S}.backfills (run_id, name, status, started_at, updated_at, completed_at) VALUES
	('run-a', 'orgs', 'completed', now(), now(), now()),
	('run-gone', 'orgs', 'completed', now(), now(), now()),
	('run-all', 'all', 'completed', now(), now(), now())`)); err != nil {
		t.Fatal(err)
	}
	if n, err := MigrateCount(ctx, Config{URL: testURL(t), Schema: s.schema}); n != 1 || err != nil {
		t.Fatalf("MigrateCount = %d, %v; want 019 applied", n, err)
	}
	rows, err := s.BackfillList(ctx, store.BackfillFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.RunID] = r.Tenant
	}
	want := map[string]string{"run-a": "org-a", "run-gone": "", "run-all": ""}
	for id, tenant := range want {
		if v, ok := got[id]; !ok || v != tenant {
			t.Errorf("row %s: tenant %q (present %v); want %q", id, v, ok, tenant)
		}
	}
	if rows, err := s.BackfillList(ctx, store.BackfillFilter{Name: "orgs", Tenant: "org-a"}); err != nil || len(rows) != 1 {
		t.Fatalf("the passes of (orgs, org-a) = %+v, %v; want run-a's", rows, err)
	}
}
