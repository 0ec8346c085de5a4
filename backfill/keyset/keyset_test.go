package keyset_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/backfill/keyset"
)

type item struct {
	Org string
	ID  int64
}

// Pages walk a composite key in order, scoped to a tenant and a predicate with its own
// arguments, with no row skipped or repeated, and never use OFFSET.
func TestCompositeKeysetPages(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "k.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE items (org TEXT, id INTEGER, kind TEXT, PRIMARY KEY (org, id))`); err != nil {
		t.Fatal(err)
	}
	for _, org := range []string{"a", "b", "c"} {
		for id := 1; id <= 7; id++ {
			kind := "keep"
			if id%2 == 0 {
				kind = "skip"
			}
			if _, err := db.Exec(`INSERT INTO items VALUES ($1, $2, $3)`, org, id, kind); err != nil {
				t.Fatal(err)
			}
		}
	}
	q := keyset.Query{Table: "items", Columns: []string{"org", "id"}, Keys: []string{"org", "id"}, Where: "kind = $1",
		Args: []any{"keep"}, TenantColumn: "org"}
	if d := q.Describe(); strings.Contains(strings.ToUpper(d), "OFFSET") || !strings.Contains(d, "ORDER BY org, id") {
		t.Fatalf("statement %q", d)
	}
	src := keyset.SQL(db, q, func(scan func(...any) error) (item, error) {
		var it item
		return it, scan(&it.Org, &it.ID)
	}, func(it item) backfill.Cursor { return backfill.Cursor{it.Org, it.ID} })

	walk := func(tenant string) []item {
		var all []item
		var after backfill.Cursor
		for {
			rows, next, err := src.Page(context.Background(), backfill.PageRequest{After: after, Limit: 3, Tenant: tenant})
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, rows...)
			if len(rows) < 3 {
				return all
			}
			after = next
		}
	}
	every := walk("")
	if len(every) != 12 || every[0] != (item{"a", 1}) || every[4] != (item{"b", 1}) || every[11] != (item{"c", 7}) {
		t.Fatalf("every tenant: %v", every)
	}
	if b := walk("b"); len(b) != 4 || b[0] != (item{"b", 1}) || b[3] != (item{"b", 7}) {
		t.Fatalf("tenant b: %v", b)
	}
	if _, _, err := src.Page(context.Background(), backfill.PageRequest{After: backfill.Cursor{"a"}, Limit: 3}); err == nil {
		t.Fatal("a cursor of one value for two keys was accepted")
	}
}

// A per-tenant count counts the pass's tenant's rows: the tenant is the query's last argument,
// after the query's own.
func TestCountForTakesTheTenantLast(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE items (org TEXT, id INTEGER, kind TEXT);
		INSERT INTO items VALUES ('a', 1, 'keep'), ('a', 2, 'keep'), ('a', 3, 'skip'), ('b', 1, 'keep')`); err != nil {
		t.Fatal(err)
	}
	count := keyset.CountSQLFor(db, `SELECT count(*) FROM items WHERE kind = $1 AND org = $2`, "keep")
	for tenant, want := range map[string]int64{"a": 2, "b": 1, "c": 0} {
		if n, err := count(context.Background(), backfill.CountRequest{Tenant: tenant}); err != nil || n != want {
			t.Errorf("count of tenant %s = %d, %v; want %d", tenant, n, err, want)
		}
	}
}
