package sqlite

import (
	"io/fs"
	"testing"
	"testing/fstest"
)

// A file the ledger's rows were written to before they carried a tenant upgrades in place: each
// row takes its run's tenant while the run is still there (the pass's tenant is its run's), a row
// whose run is gone keeps no tenant, and the rows of no tenant stay so. Without it, a per-tenant
// backfill's passes from before the upgrade would all read as passes of no tenant.
func TestBackfillTenantMigrationTakesEachRowsTenantFromItsRun(t *testing.T) {
	db := rawDB(t)
	older := fstest.MapFS{}
	err := fs.WalkDir(migrationFiles, "migrations", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if d.Name() < "013_" { // the schema as the build before the tenant left it
			body, err := fs.ReadFile(migrationFiles, path)
			older[path] = &fstest.MapFile{Data: body}
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate(t.Context(), db, older, base); err != nil {
		t.Fatalf("migrate to 012: %v", err)
	}
	for _, q := range []string{
		`INSERT INTO runs (id, job, queue, key, tenant, no_tenant, state, attempt, lease_until, ready_at, last_seq,
			created_at, updated_at, finished_at)
			VALUES ('run-a', 'orgs', 'q', 'orgs', 'org-a', 0, 'completed', 1, 0, 0, 1, 0, 0, 0),
			       ('run-all', 'all', 'q', 'all', '', 1, 'completed', 1, 0, 0, 1, 0, 0, 0)`,
		`INSERT INTO backfills (run_id, name, status, started_at, updated_at, completed_at)
			VALUES ('run-a', 'orgs', 'completed', 1, 1, 1), ('run-gone', 'orgs', 'completed', 2, 2, 2),
			       ('run-all', 'all', 'completed', 3, 3, 3)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := migrate(t.Context(), db, migrationFiles, base); err != nil {
		t.Fatalf("migrate to the newest: %v", err)
	}
	rows, err := db.Query(`SELECT ` + backfillCols + ` FROM backfills ORDER BY run_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		b, err := scanBackfill(rows)
		if err != nil {
			t.Fatal(err)
		}
		got[b.RunID] = b.Tenant
	}
	want := map[string]string{"run-a": "org-a", "run-gone": "", "run-all": ""}
	for id, tenant := range want {
		if v, ok := got[id]; !ok || v != tenant {
			t.Errorf("row %s: tenant %q (present %v); want %q", id, v, ok, tenant)
		}
	}
}
