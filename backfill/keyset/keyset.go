// Package keyset holds ready-made backfill sources over a SQL table or view: one statement per
// page, keyset on a unique (possibly composite) key, never OFFSET.
//
//	src := keyset.SQL(db, keyset.Query{
//		Table:   "posts",
//		Columns: []string{"id", "title"},
//		Keys:    []string{"id"},
//		Where:   "slug IS NULL",
//	}, func(scan func(...any) error) (Post, error) {
//		var p Post
//		return p, scan(&p.ID, &p.Title)
//	}, func(p Post) backfill.Cursor { return backfill.Cursor{p.ID} })
//
// Each page runs
//
//	SELECT <Columns> FROM <Table> WHERE (<Where>) AND (<Keys>) > (<cursor>) ORDER BY <Keys> LIMIT <batch>
//
// so an index on the keys makes every page cost the same, the first or the millionth.
package keyset

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
)

// Query describes the rows a backfill sweeps. Names are written into the statement as given:
// they are the author's code, never input.
type Query struct {
	// Table is a table, a view or a join: whatever FROM takes.
	Table string
	// Columns are selected in this order; the scan function reads them in the same order.
	Columns []string
	// Keys are the keyset's columns, unique together (a primary key, or a composite such as
	// tenant_id, id), in order.
	Keys []string
	// Where is an optional predicate, with $1… for Args.
	Where string
	Args  []any
	// TenantColumn scopes each page to the pass's tenant, when the backfill is per tenant.
	TenantColumn string
}

// Scan reads one row: call scan with a destination per column.
type Scan[Row any] func(scan func(dest ...any) error) (Row, error)

// statement builds one page's statement and arguments. Placeholders are $n, which Postgres and
// SQLite both read.
func (q Query) statement(req backfill.PageRequest) (string, []any, error) {
	if q.Table == "" || len(q.Columns) == 0 || len(q.Keys) == 0 {
		return "", nil, jobs.Errorf(jobs.CodeJobDefinition, "keyset: a query needs a table, columns and keys")
	}
	args := append([]any(nil), q.Args...)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	var where []string
	if q.Where != "" {
		where = append(where, "("+q.Where+")")
	}
	if q.TenantColumn != "" && req.Tenant != "" {
		where = append(where, q.TenantColumn+" = "+arg(req.Tenant))
	}
	if req.After != nil {
		if len(req.After) != len(q.Keys) {
			return "", nil, jobs.Errorf(jobs.CodeInvariant, "keyset: a cursor of %d values for %d keys", len(req.After), len(q.Keys))
		}
		ph := make([]string, len(req.After))
		for i, v := range req.After {
			ph[i] = arg(v)
		}
		if len(q.Keys) == 1 {
			where = append(where, q.Keys[0]+" > "+ph[0])
		} else {
			where = append(where, "("+strings.Join(q.Keys, ", ")+") > ("+strings.Join(ph, ", ")+")")
		}
	}
	text := "SELECT " + strings.Join(q.Columns, ", ") + " FROM " + q.Table
	if len(where) > 0 {
		text += " WHERE " + strings.Join(where, " AND ")
	}
	text += " ORDER BY " + strings.Join(q.Keys, ", ") + " LIMIT " + arg(req.Limit)
	return text, args, nil
}

// Describe is the statement's shape, part of the backfill's checksum.
func (q Query) Describe() string {
	text, _, _ := q.statement(backfill.PageRequest{Limit: 1})
	return text
}

// SQL is a keyset source over database/sql (SQLite, or Postgres through pgx/stdlib).
func SQL[Row any](db *sql.DB, q Query, scan Scan[Row], key func(Row) backfill.Cursor) backfill.Source[Row] {
	return &source[Row]{q: q, scan: scan, key: key,
		query: func(ctx context.Context, text string, args []any) (rows, func(), error) {
			rs, err := db.QueryContext(ctx, text, args...)
			if err != nil {
				return nil, nil, err
			}
			return rs, func() { rs.Close() }, nil
		}}
}

// Pgx is a keyset source over a pgx pool.
func Pgx[Row any](pool *pgxpool.Pool, q Query, scan Scan[Row], key func(Row) backfill.Cursor) backfill.Source[Row] {
	return &source[Row]{q: q, scan: scan, key: key,
		query: func(ctx context.Context, text string, args []any) (rows, func(), error) {
			rs, err := pool.Query(ctx, text, args...)
			if err != nil {
				return nil, nil, err
			}
			return rs, rs.Close, nil
		}}
}

// maxPrealloc bounds the rows a page reserves before it reads any.
const maxPrealloc = 4096

// rows is what both drivers' result sets share.
type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// source is one keyset source; query is the only part that knows the driver.
type source[Row any] struct {
	q     Query
	scan  Scan[Row]
	key   func(Row) backfill.Cursor
	query func(ctx context.Context, text string, args []any) (rows, func(), error)
}

func (s *source[Row]) Describe() string { return s.q.Describe() }

func (s *source[Row]) Page(ctx context.Context, req backfill.PageRequest) ([]Row, backfill.Cursor, error) {
	text, args, err := s.q.statement(req)
	if err != nil {
		return nil, nil, err
	}
	rs, done, err := s.query(ctx, text, args)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	// The page is at most Limit rows and is usually full, so it is sized once rather than grown
	// by doubling (about ten copies of a page of 1,000). The bound keeps a huge declared batch
	// from reserving memory a short page never uses.
	out := make([]Row, 0, min(req.Limit, maxPrealloc))
	scan := rs.Scan // one method value per page, not one per row
	for rs.Next() {
		r, err := s.scan(scan)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, nil, err
	}
	return out, lastKey(out, s.key), nil
}

func lastKey[Row any](rows []Row, key func(Row) backfill.Cursor) backfill.Cursor {
	if len(rows) == 0 {
		return nil
	}
	return key(rows[len(rows)-1])
}

// CountSQL counts with one query over database/sql, parsing the answer (backfill.ParseCount).
func CountSQL(db *sql.DB, query string, args ...any) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		var v any
		if err := db.QueryRowContext(ctx, query, args...).Scan(&v); err != nil {
			return 0, err
		}
		return backfill.ParseCount(v)
	}
}

// CountPgx counts with one query over a pgx pool, parsing the answer (backfill.ParseCount).
func CountPgx(pool *pgxpool.Pool, query string, args ...any) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		var v any
		if err := pool.QueryRow(ctx, query, args...).Scan(&v); err != nil {
			return 0, err
		}
		return backfill.ParseCount(v)
	}
}

// CountSQLFor is CountSQL for backfill.CountFor: the pass's tenant is the query's last argument,
// after args ($n with n = len(args)+1), so a per-tenant backfill counts the tenant's rows only:
//
//	backfill.CountFor(keyset.CountSQLFor(db, `SELECT count(*) FROM posts WHERE slug IS NULL AND org_id = $1`))
//
// The tenant is "" for a backfill declared for every tenant; such a backfill declares Count.
func CountSQLFor(db *sql.DB, query string, args ...any) func(context.Context, backfill.CountRequest) (int64, error) {
	return func(ctx context.Context, req backfill.CountRequest) (int64, error) {
		return CountSQL(db, query, withTenant(args, req)...)(ctx)
	}
}

// CountPgxFor is CountPgx for backfill.CountFor: the pass's tenant is the query's last argument,
// after args ($n with n = len(args)+1), as CountSQLFor.
func CountPgxFor(pool *pgxpool.Pool, query string, args ...any) func(context.Context, backfill.CountRequest) (int64, error) {
	return func(ctx context.Context, req backfill.CountRequest) (int64, error) {
		return CountPgx(pool, query, withTenant(args, req)...)(ctx)
	}
}

func withTenant(args []any, req backfill.CountRequest) []any {
	return append(append(make([]any, 0, len(args)+1), args...), req.Tenant)
}
