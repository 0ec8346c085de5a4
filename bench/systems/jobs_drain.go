package systems

import (
	"context"
	"fmt"
	"runtime"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/postgres"
)

var _ Drainer = (*jobsSystem)(nil)

// Drain for our engine: the backlog goes in with Job.EnqueueMany through an unstarted engine
// (on Postgres over a store and pool of their own, closed before the window); the timed part
// starts a worker of `workers` slots on the engine Setup started. Every run keeps its full
// history (RunStarted and the completion event), as every other scenario does.
func (s *jobsSystem) Drain(ctx context.Context, n, workers int) (Measure, error) {
	if n > jobs.MaxEnqueueMany {
		return nil, fmt.Errorf("drain of %d jobs: EnqueueMany takes at most %d a call", n, jobs.MaxEnqueueMany)
	}
	var (
		st   store.Store = s.st
		load *pgxpool.Pool
	)
	if s.backend == "postgres" {
		u, err := loadURL(s.dbURL)
		if err != nil {
			return nil, err
		}
		pg, err := postgres.Open(ctx, postgres.Config{URL: u, Schema: "jobs", MaxConns: 2})
		if err != nil {
			return nil, err
		}
		defer pg.Close()
		if load, err = newPool(ctx, u, 1); err != nil {
			return nil, err
		}
		st = pg
	}
	side, err := engine.New(engine.Config{Store: st, AllowUndeclared: true, Logger: quietLogger()})
	if err != nil {
		return nil, err
	}
	ins := make([]int, n)
	for i := range ins {
		ins[i] = i
	}
	items, err := noopDef.EnqueueMany(ctx, side, ins)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	for i, it := range items {
		if it.Error != nil || it.RunID == "" || it.Deduped {
			return nil, fmt.Errorf("load: item %d: %+v", i, it)
		}
	}
	if load != nil {
		st.Close() // its backends exit before the baseline (the deferred Close is then a no-op)
		if err := settleLoad(ctx, s.dbURL, load, "jobs.runs", "jobs.history"); err != nil {
			return nil, err
		}
	}
	runtime.GC()
	return func(ctx context.Context) (Result, error) {
		// BENCH_REMOTE_PROFILE names a directory for a CPU profile of the window (a diagnosis aid).
		defer profile(fmt.Sprintf("drain%d", workers))()
		if err := s.startWorker(ctx, noopDef, workers); err != nil {
			return Result{}, err
		}
		if err := awaitCount(ctx, int64(n), s.completed.Load); err != nil {
			return Result{}, err
		}
		// The acknowledged completions are the clock; the store is the check.
		done, err := s.countCompleted(ctx)
		if err != nil {
			return Result{}, err
		}
		if done != n {
			return Result{}, fmt.Errorf("%d completions acknowledged but %d completed runs in the store", s.completed.Load(), done)
		}
		return Result{Units: done, Backend: s.backend, Note: "full history"}, nil
	}, nil
}

// countCompleted counts the completed runs through the store's queue statistics, the same on
// every backend.
func (s *jobsSystem) countCompleted(ctx context.Context) (int, error) {
	stats, err := s.st.QueueStats(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, q := range stats {
		n += q.Counts[store.StateCompleted]
	}
	return n, nil
}
