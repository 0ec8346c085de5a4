package examples

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/backfill/keyset"
)

// InvoicesSchema is the application table the invoice-currency backfill sweeps: a migration added
// the currency column, new invoices are written with it, and the backfill fills it in for the
// invoices written before. The key is composite (org_id, id), which a keyset source pages on as
// one ordered pair.
const InvoicesSchema = `CREATE TABLE invoices (
	org_id       TEXT   NOT NULL,
	id           BIGINT NOT NULL,
	amount_cents BIGINT NOT NULL,
	currency     TEXT,
	PRIMARY KEY (org_id, id)
)`

// Invoice is a row the backfill reads.
type Invoice struct {
	OrgID string
	ID    int64
}

// invoicesWithoutCurrency is the backfill's predicate: the source selects on it and the count
// counts it, so a pass that ran out while the count still answers above zero stalled.
var invoicesWithoutCurrency = keyset.Query{
	Table:   "invoices",
	Columns: []string{"org_id", "id"},
	Keys:    []string{"org_id", "id"},
	Where:   "currency IS NULL",
}

func scanInvoice(scan func(...any) error) (Invoice, error) {
	var in Invoice
	return in, scan(&in.OrgID, &in.ID)
}

func invoiceKey(in Invoice) backfill.Cursor { return backfill.Cursor{in.OrgID, in.ID} }

// The options both variants declare: a page of 500 invoices, 20 pages a second at most.
func invoiceOptions(count func(context.Context) (int64, error)) []backfill.Option {
	return []backfill.Option{backfill.BatchSize(500), backfill.Rate(20), backfill.Count(count)}
}

// InvoiceCurrencySQL is the backfill over database/sql (SQLite here). Its writes are guarded by
// the predicate (currency IS NULL), so a page handled twice, after a crash between its last row
// and its checkpoint, changes nothing the second time.
func InvoiceCurrencySQL(db *sql.DB) *backfill.Backfill[Invoice] {
	return backfill.MustDefine("invoice-currency", backfill.AllTenants(),
		keyset.SQL(db, invoicesWithoutCurrency, scanInvoice, invoiceKey),
		func(ctx context.Context, b backfill.Batch[Invoice]) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback() }()
			for _, in := range b.Rows {
				if _, err := tx.ExecContext(ctx, `UPDATE invoices SET currency = 'EUR'
					WHERE org_id = $1 AND id = $2 AND currency IS NULL`, in.OrgID, in.ID); err != nil {
					return err
				}
			}
			return tx.Commit()
		},
		invoiceOptions(keyset.CountSQL(db, `SELECT count(*) FROM invoices WHERE currency IS NULL`))...)
}

// InvoiceCurrencyPgx is the same backfill over a pgx pool: one UPDATE per page.
func InvoiceCurrencyPgx(pool *pgxpool.Pool) *backfill.Backfill[Invoice] {
	return backfill.MustDefine("invoice-currency", backfill.AllTenants(),
		keyset.Pgx(pool, invoicesWithoutCurrency, scanInvoice, invoiceKey),
		func(ctx context.Context, b backfill.Batch[Invoice]) error {
			orgs, ids := make([]string, len(b.Rows)), make([]int64, len(b.Rows))
			for i, in := range b.Rows {
				orgs[i], ids[i] = in.OrgID, in.ID
			}
			_, err := pool.Exec(ctx, `UPDATE invoices i SET currency = 'EUR'
				FROM unnest($1::text[], $2::bigint[]) AS u(org_id, id)
				WHERE i.org_id = u.org_id AND i.id = u.id AND i.currency IS NULL`, orgs, ids)
			return err
		},
		invoiceOptions(keyset.CountPgx(pool, `SELECT count(*) FROM invoices WHERE currency IS NULL`))...)
}
