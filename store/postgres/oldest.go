package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
// it builds (a plain CREATE INDEX would hold writes to runs for the whole build). When another
// session is building it (two engines starting at once), it waits for that build; an invalid
// index that no session is building (a build that failed half-way) is dropped and built again.
func (s *Store) PrepareOldestFirst(ctx context.Context) error {
	const op = "prepare the oldest-first claim's index"
	for range readyIndexTries {
		found, valid, building, err := s.readyIndexState(ctx)
		switch {
		case err != nil:
			return unavailable(op, err)
		case found && valid:
			return nil
		case found && building:
			select {
			case <-ctx.Done():
				return unavailable(op, ctx.Err())
			case <-time.After(readyIndexPoll):
			}
			continue
		}
		if err := s.buildReadyIndex(ctx, found); err != nil {
			return unavailable(op, err)
		}
	}
	return jobs.Errorf(jobs.CodeStoreUnavailable, "postgres %s: runs_ready is still not valid after %v", op,
		readyIndexPoll*readyIndexTries)
}

// buildReadyIndex drops an invalid runs_ready (when stale) and builds it. The simple protocol:
// CONCURRENTLY refuses to run inside a transaction block, which an extended-protocol pipeline
// may open.
func (s *Store) buildReadyIndex(ctx context.Context, stale bool) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	pc := c.Conn().PgConn()
	if stale {
		if _, err := pc.Exec(ctx, s.render(sqlReadyIndexDrop)).ReadAll(); err != nil {
			return err
		}
	}
	_, err = pc.Exec(ctx, s.render(sqlReadyIndexCreate)).ReadAll()
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07") {
		return nil // another session created it between our read and our build: look again
	}
	return err
}

// readyIndexState reports whether runs_ready exists, is valid, and is being built.
func (s *Store) readyIndexState(ctx context.Context) (found, valid, building bool, err error) {
	err = s.pool.QueryRow(ctx, sqlReadyIndexState, s.schema).Scan(&valid, &building)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, false, nil
	}
	return err == nil, valid, building, err
}
