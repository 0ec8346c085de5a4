package keyset_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/backfill/keyset"
)

// BenchmarkSQLPage reads one full page of 1,000 rows through keyset.SQL over SQLite and reports
// the allocations per row (go test -run '^$' -bench SQLPage -benchmem ./backfill/keyset).
func BenchmarkSQLPage(b *testing.B) {
	db, err := sql.Open("sqlite", filepath.Join(b.TempDir(), "p.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE items (id INTEGER PRIMARY KEY)`); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(`WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM g WHERE n < 1000) INSERT INTO items SELECT n FROM g`); err != nil {
		b.Fatal(err)
	}
	src := keyset.SQL(db, keyset.Query{Table: "items", Columns: []string{"id"}, Keys: []string{"id"}},
		func(scan func(...any) error) (int64, error) {
			var id int64
			return id, scan(&id)
		}, func(id int64) backfill.Cursor { return backfill.Cursor{id} })
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rows, _, err := src.Page(ctx, backfill.PageRequest{Limit: 1000})
		if err != nil || len(rows) != 1000 {
			b.Fatalf("%d rows, %v", len(rows), err)
		}
	}
	b.ReportMetric(float64(testing.AllocsPerRun(3, func() { _, _, _ = src.Page(ctx, backfill.PageRequest{Limit: 1000}) }))/1000, "allocs/row")
}
