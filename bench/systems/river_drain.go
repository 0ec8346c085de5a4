package systems

import (
	"context"
	"fmt"
	"runtime"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

var _ Drainer = (*riverSystem)(nil)

// Drain for River: the backlog goes in with InsertMany from an insert-only client on a pool of
// its own (closed before the window); the timed part starts the client with MaxWorkers =
// workers (tuned: FetchCooldown and FetchPollInterval as in NoopJobs), counts completion events
// and then checks the table.
func (s *riverSystem) Drain(ctx context.Context, n, workers int) (Measure, error) {
	u, err := loadURL(s.dbURL)
	if err != nil {
		return nil, err
	}
	load, err := newPool(ctx, u, 2)
	if err != nil {
		return nil, err
	}
	inserter, err := river.NewClient(riverpgxv5.New(load), &river.Config{Logger: quietLogger()})
	if err != nil {
		load.Close()
		return nil, fmt.Errorf("river client: %w", err)
	}
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	if _, err := inserter.InsertMany(ctx, params); err != nil {
		load.Close()
		return nil, fmt.Errorf("load: %w", err)
	}
	if err := settleLoad(ctx, s.dbURL, load, "river_job"); err != nil {
		return nil, err
	}
	runtime.GC()
	return func(ctx context.Context) (Result, error) {
		if err := s.start(ctx, workers, n); err != nil {
			return Result{}, err
		}
		for completed := 0; completed < n; {
			select {
			case ev := <-s.events:
				if ev.Kind != river.EventKindJobCompleted {
					return Result{}, fmt.Errorf("job %d ended with event %s", ev.Job.ID, ev.Kind)
				}
				completed++
			case <-ctx.Done():
				return Result{}, fmt.Errorf("after %d of %d completions: %w", completed, n, ctx.Err())
			}
		}
		return s.checked(ctx, n)
	}, nil
}
