package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// WorkerRelease implements store.Workers.
func (s *Store) WorkerRelease(ctx context.Context, workerID string, now time.Time) ([]store.Woken, error) {
	if workerID == "" {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "release of a worker needs its id")
	}
	q := schemaReplacer(s.schema).Replace(sqlWorkerRelease)
	rows, err := s.pool.Query(ctx, q, workerID, pgTime(now), s.chReady)
	if err != nil {
		return nil, unavailable("worker release", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Woken, error) {
		var w store.Woken
		err := row.Scan(&w.RunID, &w.Queue, &w.Reclaimed)
		return w, err
	})
	if err != nil {
		return nil, unavailable("worker release", err)
	}
	return out, nil
}
