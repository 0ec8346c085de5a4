package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

var _ store.OldestFirstPreparer = (*Store)(nil)

// readyIndexPoll is how often PrepareOldestFirst looks again while another session builds the
// index; readyIndexTries bounds how many times it looks.
const (
	readyIndexPoll  = 100 * time.Millisecond
	readyIndexTries = 1200
)

// PrepareOldestFirst implements store.OldestFirstPreparer: it builds runs_ready, the oldest-first
// claim's index, unless a valid one exists. CONCURRENTLY, so that creates and claims go on while
// it builds (a plain CREATE INDEX would hold writes to runs for the whole build). One session
// builds at a time: two concurrent builds on one table deadlock (each waits for the other's
// transaction to end), so a builder holds a session advisory lock, taken with a try that never
// waits (a session blocked on the lock would hold a snapshot the build waits out, the same
// deadlock), and the others look again every readyIndexPoll until the index is valid. An invalid
// index that nobody is building (a build that failed half-way) is dropped and built again.
func (s *Store) PrepareOldestFirst(ctx context.Context) error {
	const op = "prepare the oldest-first claim's index"
	for range readyIndexTries {
		found, valid, _, err := s.readyIndexState(ctx)
		if err != nil {
			return unavailable(op, err)
		}
		if found && valid {
			return nil
		}
		built, err := s.buildReadyIndex(ctx)
		if err != nil {
			return unavailable(op, err)
		}
		if built {
			continue // look again: valid now, unless the build failed half-way
		}
		select {
		case <-ctx.Done():
			return unavailable(op, ctx.Err())
		case <-time.After(readyIndexPoll):
		}
	}
	return jobs.Errorf(jobs.CodeStoreUnavailable, "postgres %s: runs_ready is still not valid after %v", op,
		readyIndexPoll*readyIndexTries)
}

// buildReadyIndex builds runs_ready under the builder's lock, dropping an invalid one first, and
// reports whether it held the lock (false: another session is building; nothing was done). The
// simple protocol: CONCURRENTLY refuses to run inside a transaction block, which an
// extended-protocol pipeline may open.
func (s *Store) buildReadyIndex(ctx context.Context) (bool, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer c.Release()
	key := s.lockKey("index", "runs_ready")
	var held bool
	if err := c.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&held); err != nil || !held {
		return false, err
	}
	defer func() {
		if _, err := c.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key); err != nil {
			c.Conn().Close(context.WithoutCancel(ctx)) // a closed session's locks go with it
		}
	}()
	// Under the lock, what the last builder left: nothing, a valid index, or an invalid one.
	var valid bool
	err = c.QueryRow(ctx, sqlReadyIndexState, s.schema).Scan(&valid, new(bool))
	switch {
	case err == nil && valid:
		return true, nil
	case err == nil:
		if _, err := c.Conn().PgConn().Exec(ctx, s.render(sqlReadyIndexDrop)).ReadAll(); err != nil {
			return true, err
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return true, err
	}
	_, err = c.Conn().PgConn().Exec(ctx, s.render(sqlReadyIndexCreate)).ReadAll()
	return true, err
}

// readyIndexState reports whether runs_ready exists, is valid, and is being built.
func (s *Store) readyIndexState(ctx context.Context) (found, valid, building bool, err error) {
	err = s.pool.QueryRow(ctx, sqlReadyIndexState, s.schema).Scan(&valid, &building)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, false, nil
	}
	return err == nil, valid, building, err
}
