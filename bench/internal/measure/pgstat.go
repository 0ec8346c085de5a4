package measure

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DBStats are the pg_stat_database counters of one database plus the cluster's WAL position.
// The counters are cumulative; subtract two readings with Sub.
type DBStats struct {
	XactCommit   int64 `json:"xact_commit"`
	XactRollback int64 `json:"xact_rollback"`
	TupInserted  int64 `json:"tup_inserted"`
	TupUpdated   int64 `json:"tup_updated"`
	TupDeleted   int64 `json:"tup_deleted"`
	// Sessions counts connections established: a pool that churns connections pays a
	// backend start-up for each, which shows here and in machine CPU.
	Sessions int64 `json:"sessions"`
	// WALBytes is the cluster's WAL insert position. It is cluster-wide, but nothing else writes
	// while a run is measured, so its delta is the run's WAL volume (plus autovacuum's).
	WALBytes int64 `json:"wal_bytes"`
}

// Sub returns b-a field by field.
func (b DBStats) Sub(a DBStats) DBStats {
	return DBStats{
		XactCommit:   b.XactCommit - a.XactCommit,
		XactRollback: b.XactRollback - a.XactRollback,
		TupInserted:  b.TupInserted - a.TupInserted,
		TupUpdated:   b.TupUpdated - a.TupUpdated,
		TupDeleted:   b.TupDeleted - a.TupDeleted,
		Sessions:     b.Sessions - a.Sessions,
		WALBytes:     b.WALBytes - a.WALBytes,
	}
}

// RowsWritten is inserted+updated+deleted tuples.
func (b DBStats) RowsWritten() int64 { return b.TupInserted + b.TupUpdated + b.TupDeleted }

// ReadDBStats reads the counters of database db through conn, which must be connected to a
// different database (the admin one) so that the reading itself is not counted.
//
// PostgreSQL 15 keeps statistics in shared memory, but each backend flushes its pending counts
// at most once a second, and an idle backend may hold them for up to ten seconds. Readings are
// therefore only exact when no backend of db is alive: call WaitIdle first for the final reading.
func ReadDBStats(ctx context.Context, conn *pgx.Conn, db string) (DBStats, error) {
	var s DBStats
	// Each autocommit query is its own transaction, so the stats snapshot is never stale.
	err := conn.QueryRow(ctx, `
		SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted, sessions,
		       pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint
		FROM pg_stat_database WHERE datname = $1`, db).
		Scan(&s.XactCommit, &s.XactRollback, &s.TupInserted, &s.TupUpdated, &s.TupDeleted, &s.Sessions, &s.WALBytes)
	if err != nil {
		return DBStats{}, fmt.Errorf("read pg_stat_database for %s: %w", db, err)
	}
	return s, nil
}

// WaitIdle waits until no client backend is connected to db (each backend flushes its
// statistics as it exits), or until timeout. Autovacuum workers are not waited for: they come
// and go on their own schedule. It reports how many were still there if it gave up.
func WaitIdle(ctx context.Context, conn *pgx.Conn, db string, timeout time.Duration) error {
	return WaitGone(ctx, conn, db, "", timeout)
}

// WaitGone is WaitIdle for the backends whose application_name is app alone ("" for all).
func WaitGone(ctx context.Context, conn *pgx.Conn, db, app string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var n int
		if err := conn.QueryRow(ctx,
			`SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()
			 AND ($2 = '' OR application_name = $2)`, db, app).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d backends still connected to %s after %s", n, db, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
