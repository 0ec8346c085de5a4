package migrations_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"

	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/backfill/migrations"
	"github.com/ultimat3/jobs/internal/testenv"
)

// ledgers creates golang-migrate's and goose's tables through exec and checks both readers.
func checkLedgers(t *testing.T, q migrations.Querier, exec func(string) error) {
	t.Helper()
	ctx := context.Background()
	gm, goose := migrations.GolangMigrate{Q: q}, migrations.Goose{Q: q}
	// Neither table exists: unreadable, which the gate reads as unknown, never as a refusal.
	if _, err := gm.Applied(ctx, "1"); err == nil {
		t.Fatal("golang-migrate: no table, no error")
	}
	if st := backfill.MigrationState(ctx, goose, "1"); st != backfill.MigrationUnknown {
		t.Fatalf("goose without its table: %v; want unknown", st)
	}
	for _, stmt := range []string{
		`CREATE TABLE schema_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (20260814120000, false)`,
		`CREATE TABLE goose_db_version (id integer PRIMARY KEY, version_id bigint NOT NULL, is_applied boolean NOT NULL)`,
		`INSERT INTO goose_db_version VALUES (1, 0, true), (2, 5, true), (3, 6, true), (4, 6, false)`,
	} {
		if err := exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		l    backfill.MigrationLedger
		id   string
		want backfill.Migration
	}{
		{gm, "20260814120000", backfill.MigrationApplied},
		{gm, "20260101000000", backfill.MigrationApplied},
		{gm, "20260901000000", backfill.MigrationPending},
		{gm, "not-a-number", backfill.MigrationPending}, // can never be applied: refused, not "unknown"
		{goose, "not-a-number", backfill.MigrationPending},
		{goose, "5", backfill.MigrationApplied},
		{goose, "6", backfill.MigrationPending}, // rolled back: its newest row says so
		{goose, "7", backfill.MigrationPending},
	} {
		if got := backfill.MigrationState(ctx, c.l, c.id); got != c.want {
			t.Errorf("%T %s: %v; want %v", c.l, c.id, got, c.want)
		}
	}
	// A dirty version failed half-way: it is not applied.
	if err := exec(`UPDATE schema_migrations SET dirty = true`); err != nil {
		t.Fatal(err)
	}
	if got := backfill.MigrationState(ctx, gm, "20260814120000"); got != backfill.MigrationPending {
		t.Errorf("dirty version: %v; want pending", got)
	}
}

func TestLedgersOverDatabaseSQL(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "app.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkLedgers(t, migrations.SQL(db), func(q string) error { _, err := db.Exec(q); return err })
}

func TestLedgersOverPgx(t *testing.T) {
	t.Parallel()
	url, schema := testenv.FreshSchema(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	pool, err := pgxpool.New(context.Background(), url+sep+"search_path="+schema)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	checkLedgers(t, migrations.Pgx(pool), func(q string) error { _, err := pool.Exec(context.Background(), q); return err })
}
