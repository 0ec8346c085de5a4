package examples_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"

	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/examples"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// execer is what seeding needs of either database.
type execer func(ctx context.Context, q string, args ...any) error

func seedInvoices(t *testing.T, exec execer) {
	t.Helper()
	ctx := context.Background()
	if err := exec(ctx, examples.InvoicesSchema); err != nil {
		t.Fatal(err)
	}
	// 3 orgs × 400 invoices; every tenth one was written after the migration, with its currency.
	for _, org := range []string{"org-a", "org-b", "org-c"} {
		var vals []string
		var args []any
		for id := 1; id <= 400; id++ {
			var cur any
			if id%10 == 0 {
				cur = "USD"
			}
			n := len(args)
			vals = append(vals, fmt.Sprintf("($%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4))
			args = append(args, org, id, id*100, cur)
		}
		if err := exec(ctx, "INSERT INTO invoices (org_id, id, amount_cents, currency) VALUES "+strings.Join(vals, ", "), args...); err != nil {
			t.Fatal(err)
		}
	}
}

func runInvoiceBackfill[R any](t *testing.T, b *backfill.Backfill[R], counts func() (eur, usd, null int)) {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
	env.Worker(worker.Config{PollWait: 100 * time.Millisecond}, b)
	res, err := b.Enqueue(context.Background(), env.Engine, backfill.Input{})
	if err != nil {
		t.Fatal(err)
	}
	run := env.Await(res.RunID, store.StateCompleted)
	out, err := b.Result(run.Result)
	if err != nil {
		t.Fatal(err)
	}
	if out.Rows != 1080 || out.Batches != 3 { // 1,080 invoices without a currency, pages of 500
		t.Fatalf("result = %+v; want 1080 rows in 3 pages", out)
	}
	eur, usd, null := counts()
	if eur != 1080 || usd != 120 || null != 0 {
		t.Fatalf("after the pass: %d EUR, %d USD, %d without; want 1080, 120, 0", eur, usd, null)
	}
	rows, err := env.Engine.InspectBackfills(context.Background(), store.BackfillFilter{Name: "invoice-currency"})
	if err != nil || len(rows) != 1 {
		t.Fatalf("ledger: %+v, %v", rows, err)
	}
	if r := rows[0]; r.Status != backfill.StatusCompleted || r.Rows != 1080 || r.Total != 1080 || r.Cursor != `["org-c",399]` {
		t.Fatalf("ledger row = %+v", r)
	}
	// Re-enqueued, the completed pass is skipped.
	again, _ := b.Enqueue(context.Background(), env.Engine, backfill.Input{})
	if out, _ := b.Result(env.Await(again.RunID, store.StateCompleted).Result); !out.Skipped || out.PreviousRunID != res.RunID {
		t.Fatalf("re-enqueue: %+v", out)
	}
}

func TestInvoiceBackfillOnSQLite(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "app.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	seedInvoices(t, func(ctx context.Context, q string, args ...any) error {
		_, err := db.ExecContext(ctx, q, args...)
		return err
	})
	runInvoiceBackfill(t, examples.InvoiceCurrencySQL(db), func() (eur, usd, null int) {
		_ = db.QueryRow(`SELECT count(*) FILTER (WHERE currency = 'EUR'), count(*) FILTER (WHERE currency = 'USD'),
			count(*) FILTER (WHERE currency IS NULL) FROM invoices`).Scan(&eur, &usd, &null)
		return
	})
}

func TestInvoiceBackfillOnPostgres(t *testing.T) {
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
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(context.Background(), fmt.Sprintf("CREATE SCHEMA %s", schema)); err != nil {
		t.Fatal(err)
	}
	seedInvoices(t, func(ctx context.Context, q string, args ...any) error {
		_, err := pool.Exec(ctx, q, args...)
		return err
	})
	runInvoiceBackfill(t, examples.InvoiceCurrencyPgx(pool), func() (eur, usd, null int) {
		_ = pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE currency = 'EUR'), count(*) FILTER (WHERE currency = 'USD'),
			count(*) FILTER (WHERE currency IS NULL) FROM invoices`).Scan(&eur, &usd, &null)
		return
	})
}
