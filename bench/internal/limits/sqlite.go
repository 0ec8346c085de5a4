package limits

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/ultimat3/jobs/bench/internal/measure"
	"github.com/ultimat3/jobs/bench/internal/record"
)

// SQLiteLoop is the embedded-store reference: one connection committing one-row INSERTs as fast
// as it can, in WAL mode, each INSERT its own transaction. SQLite admits one writer at a time,
// so a single committing connection is already its ceiling; more writers only add lock waits.
type SQLiteLoop struct {
	Dir      string        // scratch directory (a fresh database file is created in it)
	Sync     string        // "FULL" (durable on power loss) or "NORMAL" (WAL: may lose the last commits)
	Duration time.Duration // how long to commit for
	// Postmaster is the local Postgres server's pid (0 if unknown), so that its CPU during
	// the loop is shown too: it should be near zero.
	Postmaster int
}

// Run creates the database, verifies the pragmas really took effect, and commits for Duration.
func (l SQLiteLoop) Run(ctx context.Context) (record.Sample, error) {
	s := record.Sample{Scenario: record.ScenarioSQLite, System: "sqlite", Label: "modernc.org/sqlite one-row INSERT", Concurrency: 1}
	path := filepath.Join(l.Dir, "ref.db")
	dsn := fmt.Sprintf("file:%s?_pragma=journal_mode(WAL)&_pragma=synchronous(%s)&_pragma=busy_timeout(5000)", path, l.Sync)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return s, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // pragmas are per connection; keep the one that has them

	var journal string
	var syncMode int
	if err := db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&journal); err != nil {
		return s, err
	}
	if err := db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&syncMode); err != nil {
		return s, err
	}
	names := map[int]string{0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
	if !strings.EqualFold(journal, "wal") || names[syncMode] != strings.ToUpper(l.Sync) {
		return s, fmt.Errorf("pragmas not in force: journal_mode=%s synchronous=%s", journal, names[syncMode])
	}
	s.Sync = names[syncMode]
	s.Backend = "WAL, synchronous=" + s.Sync

	if _, err := db.ExecContext(ctx, `CREATE TABLE ins (k INTEGER NOT NULL, c INTEGER NOT NULL, PRIMARY KEY (k, c))`); err != nil {
		return s, err
	}
	stmt, err := db.PrepareContext(ctx, `INSERT INTO ins (k, c) VALUES (?, 1)`)
	if err != nil {
		return s, err
	}
	defer stmt.Close()

	win, err := measure.StartWindow(l.Postmaster, os.Getppid())
	if err != nil {
		return s, err
	}
	deadline := time.Now().Add(l.Duration)
	n := 0
	for time.Now().Before(deadline) {
		if _, err := stmt.ExecContext(ctx, rand.Int64N(9_000_000_000_000_000_000)+1); err != nil {
			return s, fmt.Errorf("insert %d: %w", n, err)
		}
		n++
	}
	u := win.Stop()
	wall := u.Wall
	s.MachineCPU, s.LoadCPU, s.PostgresCPU, s.ForeignCPU = u.Machine, u.Self, u.Postgres, u.Foreign

	// The rows are the check: every Exec was a commit.
	var rows int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM ins`).Scan(&rows); err != nil {
		return s, err
	}
	if rows != n {
		return s, fmt.Errorf("%d inserts but %d rows", n, rows)
	}
	s.Units, s.Seconds, s.Rate = n, wall.Seconds(), float64(n)/wall.Seconds()
	return s, nil
}
