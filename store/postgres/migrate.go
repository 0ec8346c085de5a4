package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
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
// Open runs it too.
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
	return migrateCount(ctx, pcfg.ConnConfig, cfg.Schema)
}

func migrate(ctx context.Context, ccfg *pgx.ConnConfig, schema string) error {
	_, err := migrateCount(ctx, ccfg, schema)
	return err
}

// migrateCount is migrate, reporting how many migrations it applied (0: already up to date).
func migrateCount(ctx context.Context, ccfg *pgx.ConnConfig, schema string) (int, error) {
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
	fail := func(err error) error {
		return jobs.Wrap(jobs.CodeStoreUnavailable, err, "postgres: migrate schema %s", schema)
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
	rows, err := tx.Query(ctx, sql[stmtMigrateApplied])
	if err != nil {
		return 0, fail(err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return 0, fail(err)
	}
	n := 0
	for _, m := range ms {
		if slices.Contains(applied, int32(m.version)) {
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
