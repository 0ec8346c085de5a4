package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"time"

	jobs "github.com/ultimat3/jobs"
)

// migrationFiles are the schema's migrations, applied in the order of their number. A released
// migration is never edited: a change to the schema is a new file, so a database created by an
// older version upgrades by running the files it has not seen.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one NNN_name.sql file.
type migration struct {
	version int
	name    string
	sql     string
}

var migrationName = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.sql$`)

// loadMigrations reads the migrations of fsys (under migrations/), checking that they are
// numbered 1, 2, 3… without gaps or duplicates: a gap would mean a file was lost, and the
// ledger could not tell a skipped migration from an applied one.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %q is not named NNN_name.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		body, err := fs.ReadFile(fsys, path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: m[2], sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migrations are not numbered 001, 002, … without gaps: %03d_%s.sql is number %d",
				m.version, m.name, i+1)
		}
	}
	return ms, nil
}

// migrate brings the database to the newest migration of fsys in ONE transaction: either every
// missing migration is applied and recorded, or none is (SQLite's DDL is transactional). The
// transaction is BEGIN IMMEDIATE (the write connection's _txlock), so two processes opening a
// new file at once cannot both apply the same migration: the second waits for the lock, then
// finds the ledger up to date.
func migrate(ctx context.Context, db *sql.DB, fsys fs.FS, now time.Time) error {
	_, err := migrateCount(ctx, db, fsys, now)
	return err
}

// migrateCount is migrate, reporting how many migrations it applied (0: already up to date).
func migrateCount(ctx context.Context, db *sql.DB, fsys fs.FS, now time.Time) (int, error) {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return 0, jobs.Wrap(jobs.CodeInvariant, err, "sqlite: migrations")
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, jobs.Wrap(jobs.CodeDriverUnavailable, err, "sqlite: migrate")
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, sqlLedgerCreate); err != nil {
		return 0, jobs.Wrap(jobs.CodeDriverUnavailable, err, "sqlite: migrate: create the ledger")
	}
	applied, err := ledgerVersions(ctx, tx)
	if err != nil {
		return 0, jobs.Wrap(jobs.CodeDriverUnavailable, err, "sqlite: migrate: read the ledger")
	}
	for v := range applied {
		if v > len(ms) {
			// Running an older binary on a newer file would write rows the newer schema's
			// invariants may not expect; refuse instead of guessing.
			return 0, jobs.Errorf(jobs.CodeDriverUnavailable,
				"sqlite: the database is at schema version %d, newer than this build's %d", v, len(ms))
		}
	}
	n := 0
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return 0, jobs.Wrap(jobs.CodeDriverUnavailable, err, "sqlite: migration %03d_%s", m.version, m.name)
		}
		if _, err := tx.ExecContext(ctx, sqlLedgerInsert, m.version, m.name, encTime(now)); err != nil {
			return 0, jobs.Wrap(jobs.CodeDriverUnavailable, err, "sqlite: migration %03d_%s: record", m.version, m.name)
		}
		n++
	}
	if err := tx.Commit(); err != nil {
		return 0, jobs.Wrap(jobs.CodeDriverUnavailable, err, "sqlite: migrate: commit")
	}
	return n, nil
}

func ledgerVersions(ctx context.Context, tx *sql.Tx) (map[int]bool, error) {
	rows, err := tx.QueryContext(ctx, sqlLedgerVersions)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out[v] = true
	}
	return out, rows.Err()
}
