// Package migrations reads an application's migrations ledger, so a backfill's requires can be
// checked against what the application applied: golang-migrate's schema_migrations and goose's
// goose_db_version, over database/sql (SQLite, Postgres through pgx/stdlib, …) or a pgx pool.
package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
)

// Querier runs one query returning at most one row; found is false when there was none.
type Querier interface {
	QueryOne(ctx context.Context, query string, args []any, dest ...any) (found bool, err error)
}

// SQL reads through database/sql. Queries use $1 placeholders, which SQLite and Postgres accept.
func SQL(db *sql.DB) Querier { return sqlQuerier{db} }

// Pgx reads through a pgx pool.
func Pgx(pool *pgxpool.Pool) Querier { return pgxQuerier{pool} }

type sqlQuerier struct{ db *sql.DB }

func (q sqlQuerier) QueryOne(ctx context.Context, query string, args []any, dest ...any) (bool, error) {
	err := q.db.QueryRowContext(ctx, query, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

type pgxQuerier struct{ pool *pgxpool.Pool }

func (q pgxQuerier) QueryOne(ctx context.Context, query string, args []any, dest ...any) (bool, error) {
	err := q.pool.QueryRow(ctx, query, args...).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// GolangMigrate reads golang-migrate's ledger: one row (version bigint, dirty bool), the version
// the database is at. Migration ids are its version numbers; an id is applied when the database
// is past it, or at it and not dirty (a dirty version failed half-way). Table defaults to
// "schema_migrations".
type GolangMigrate struct {
	Q     Querier
	Table string
}

// Applied implements backfill.MigrationLedger.
func (g GolangMigrate) Applied(ctx context.Context, id string) (bool, error) {
	want, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return false, jobs.Errorf(jobs.CodeBadRequest, "golang-migrate versions are integers; %q is not", id)
	}
	var version int64
	var dirty bool
	found, err := g.Q.QueryOne(ctx, fmt.Sprintf("SELECT version, dirty FROM %s LIMIT 1", ident(g.Table, "schema_migrations")), nil, &version, &dirty)
	if err != nil || !found {
		return false, err
	}
	return version > want || (version == want && !dirty), nil
}

// Goose reads goose's ledger, goose_db_version(version_id, is_applied): one row per apply or
// roll-back, newest last. An id is applied when its newest row says so. Table defaults to
// "goose_db_version".
type Goose struct {
	Q     Querier
	Table string
}

// Applied implements backfill.MigrationLedger.
func (g Goose) Applied(ctx context.Context, id string) (bool, error) {
	want, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return false, jobs.Errorf(jobs.CodeBadRequest, "goose versions are integers; %q is not", id)
	}
	var applied bool
	found, err := g.Q.QueryOne(ctx, fmt.Sprintf("SELECT is_applied FROM %s WHERE version_id = $1 ORDER BY id DESC LIMIT 1",
		ident(g.Table, "goose_db_version")), []any{want}, &applied)
	if err != nil || !found {
		return false, err
	}
	return applied, nil
}

// ident quotes a (possibly schema-qualified) table name.
func ident(name, def string) string {
	if name == "" {
		name = def
	}
	return pgx.Identifier(splitDots(name)).Sanitize()
}

func splitDots(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

var (
	_ backfill.MigrationLedger = GolangMigrate{}
	_ backfill.MigrationLedger = Goose{}
)
