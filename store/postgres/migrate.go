package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ultimat3/jobs"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one embedded migrations/NNN_name.up.sql.
type migration struct {
	version int
	name    string
	sql     string // with {S} for the schema
}

var migrationName = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.up\.sql$`)

// migrations returns the embedded migrations in version order. The files are part of the
// binary, so a misnamed one is a build mistake and is reported as an invariant failure.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, jobs.Wrap(jobs.CodeInvariant, err, "postgres: read embedded migrations")
	}
	var out []migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, jobs.Errorf(jobs.CodeInvariant, "postgres: migration file %q is not NNN_name.up.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		text, err := fs.ReadFile(migrationFiles, "migrations/"+e.Name())
		if err != nil {
			return nil, jobs.Wrap(jobs.CodeInvariant, err, "postgres: read migration %s", e.Name())
		}
		if len(out) > 0 && out[len(out)-1].version == v {
			return nil, jobs.Errorf(jobs.CodeInvariant, "postgres: two migrations numbered %03d", v)
		}
		out = append(out, migration{version: v, name: m[2], sql: string(text)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	return out, nil
}

// Migrate creates cfg.Schema if it is missing and applies the embedded migrations it has not
// applied yet, recording each in <schema>.schema_migrations. It is what `engine migrate` runs;
// Open runs it too. A schema that already holds every migration of this build is only read: no
// lock, no DDL, so the engine's role needs no CREATE privilege once the schema is migrated. A
// schema a newer build migrated is logged (Config.Logger) and used, as the older engines of a
// rolling upgrade use it; one whose newer migrations include one named IncompatiblePrefix… is
// refused with X_DRIVER_UNAVAILABLE.
//
// Everything happens in one transaction that first takes an advisory lock on the schema's name:
// a second process migrating at the same moment waits for the first to commit, then finds every
// migration recorded and applies none. A migration that fails rolls back with all the others of
// the call, leaving the schema as it was.
func Migrate(ctx context.Context, cfg Config) error {
	_, err := MigrateCount(ctx, cfg)
	return err
}

// MigrateCount is Migrate, reporting how many migrations it applied: 0 when the schema was
// already up to date.
func MigrateCount(ctx context.Context, cfg Config) (int, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return 0, err
	}
	// Parsed as the pool parses it, so a URL carrying pool_* parameters means the same here.
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return 0, jobs.Wrap(jobs.CodeDriverUnavailable, err, "postgres: parse URL")
	}
	return migrateCount(ctx, pcfg.ConnConfig, cfg.Schema, cfg.Logger)
}

func migrate(ctx context.Context, ccfg *pgx.ConnConfig, schema string, log *slog.Logger) error {
	_, err := migrateCount(ctx, ccfg, schema, log)
	return err
}

// migrateCount is migrate, reporting how many migrations it applied (0: already up to date).
//
// It reads the ledger first, without a lock and without DDL: a schema that holds every migration
// of this build needs nothing more, so an engine whose role may only read and write the tables
// opens a schema `engine migrate` prepared (Postgres checks the CREATE privilege of CREATE …
// IF NOT EXISTS before it checks for existence). Only when the schema, the ledger or a
// migration is missing does it take the advisory lock and migrate.
func migrateCount(ctx context.Context, ccfg *pgx.ConnConfig, schema string, log *slog.Logger) (int, error) {
	ms, err := migrations()
	if err != nil {
		return 0, err
	}
	conn, err := pgx.ConnectConfig(ctx, ccfg)
	if err != nil {
		return 0, jobs.Wrap(jobs.CodeDriverUnavailable, err, "postgres: connect")
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	}()

	sql := newStatements(schema)
	render := schemaReplacer(schema)
	s := &Store{schema: schema} // for lockKey only
	fail := func(err error) error { return migrateError(err, schema) }
	ledgerQuery := render.Replace(`SELECT version, name FROM {S}.schema_migrations`)

	// The fast path: no lock, no DDL.
	applied, err := readLedger(ctx, conn, ledgerQuery)
	switch {
	case err == nil:
		if err := checkNewer(applied, ms, schema, log); err != nil {
			return 0, err
		}
		if hasAll(applied, ms) {
			return 0, nil
		}
	case isMissingRelation(err):
		// A fresh database: migrate below.
	default:
		return 0, fail(err)
	}

	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, fail(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	// The lock is transaction-scoped: it is released by the commit (or the rollback), never
	// left behind by a process that died mid-migration.
	if _, err := tx.Exec(ctx, sql[stmtLock], s.lockKey("migrate", "")); err != nil {
		return 0, fail(err)
	}
	for _, n := range []stmt{stmtMigrateSchema, stmtMigrateLedger} {
		if _, err := tx.Exec(ctx, sql[n]); err != nil {
			return 0, fail(err)
		}
	}
	applied, err = readLedger(ctx, tx, ledgerQuery)
	if err != nil {
		return 0, fail(err)
	}
	if err := checkNewer(applied, ms, schema, log); err != nil {
		return 0, err
	}
	n := 0
	for _, m := range ms {
		if _, ok := applied[m.version]; ok {
			continue
		}
		// No arguments: pgx sends the file with the simple protocol, which runs a script of
		// several statements.
		if _, err := tx.Exec(ctx, render.Replace(m.sql)); err != nil {
			return 0, fail(fmt.Errorf("migration %03d_%s: %w", m.version, m.name, err))
		}
		if _, err := tx.Exec(ctx, sql[stmtMigrateRecord], m.version, m.name); err != nil {
			return 0, fail(err)
		}
		n++
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fail(err)
	}
	return n, nil
}

// querier is what readLedger needs of a connection or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// readLedger returns the ledger's rows: version → name.
func readLedger(ctx context.Context, q querier, query string) (map[int]string, error) {
	rows, err := q.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	var v int32
	var name string
	_, err = pgx.ForEachRow(rows, []any{&v, &name}, func() error {
		out[int(v)] = name
		return nil
	})
	return out, err
}

func hasAll(applied map[int]string, ms []migration) bool {
	for _, m := range ms {
		if _, ok := applied[m.version]; !ok {
			return false
		}
	}
	return true
}

// IncompatiblePrefix begins the name of a migration that engines of earlier versions must not
// run beside: such a version refuses to open a schema whose ledger holds a migration it does not
// know named so (NNN_incompatible_….up.sql). Every other migration keeps the schema usable by the
// engines of a rolling upgrade's older version (docs/guide.md, section 4), so a schema newer
// than the build is only reported.
const IncompatiblePrefix = "incompatible_"

// checkNewer looks at the ledger's versions this build does not know. An older engine runs
// beside newer ones during a rolling upgrade, on the schema the newer ones migrated, so such a
// schema is logged, not refused, unless one of those migrations is marked incompatible.
func checkNewer(applied map[int]string, ms []migration, schema string, log *slog.Logger) error {
	latest := 0
	if len(ms) > 0 {
		latest = ms[len(ms)-1].version
	}
	known := make(map[int]bool, len(ms))
	for _, m := range ms {
		known[m.version] = true
	}
	newest := 0
	var unknown []int
	for v := range applied {
		if !known[v] {
			unknown = append(unknown, v)
			newest = max(newest, v)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	for _, v := range unknown {
		if strings.HasPrefix(applied[v], IncompatiblePrefix) {
			return jobs.Errorf(jobs.CodeDriverUnavailable,
				"postgres: schema %s is at version %d, newer than this build's %d, and migration %03d_%s is incompatible with this build: upgrade the engine",
				schema, newest, latest, v, applied[v])
		}
	}
	if log != nil {
		log.Warn("postgres: the schema is newer than this build; running beside the newer engines of a rolling upgrade",
			"schema", schema, "schema_version", newest, "build_version", latest, "unknown_migrations", unknown)
	}
	return nil
}

// isMissingRelation reports whether err is Postgres refusing a table or a schema that does not
// exist: a database the engine has never migrated.
func isMissingRelation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000")
}

// migrateError codes a failure of migrate by its SQLSTATE. Class 42 (a privilege the role lacks,
// a name Postgres refuses, a table in the way) and class 28 (authorization) will fail the same
// way on every retry: configuration, X_DRIVER_UNAVAILABLE, terminal. Everything else (class 08,
// a lost connection; 40, a serialization failure; 57, an operator's shutdown) may pass:
// X_STORE_UNAVAILABLE, retryable.
func migrateError(err error, schema string) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "42") || strings.HasPrefix(pe.Code, "28")) {
		return jobs.Wrap(jobs.CodeDriverUnavailable, err, "postgres: migrate schema %s (SQLSTATE %s)", schema, pe.Code)
	}
	return jobs.Wrap(jobs.CodeStoreUnavailable, err, "postgres: migrate schema %s", schema)
}
