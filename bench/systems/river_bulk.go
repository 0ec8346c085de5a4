package systems

import (
	"context"
	"fmt"
	"runtime"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

var _ BulkInserter = (*riverSystem)(nil)

// BulkInsert is River's InsertMany of n no-op jobs in one call (River inserts them with COPY
// FROM in one transaction). The client's workers are not started: the clock covers the insert
// alone, as ours does.
func (s *riverSystem) BulkInsert(ctx context.Context, n int) (Measure, error) {
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	// An insert-only client: no queues, no workers, nothing polling while the insert runs.
	client, err := river.NewClient(riverpgxv5.New(s.pool), &river.Config{Logger: quietLogger()})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	runtime.GC()
	return func(ctx context.Context) (Result, error) {
		res, err := client.InsertMany(ctx, params)
		if err != nil {
			return Result{}, err
		}
		var count int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM river_job`).Scan(&count); err != nil {
			return Result{}, err
		}
		if count != n || len(res) != n {
			return Result{}, fmt.Errorf("%d results, %d rows; want %d", len(res), count, n)
		}
		return Result{Units: count, Backend: "postgres (pgx v5)", Note: "InsertMany"}, nil
	}, nil
}
