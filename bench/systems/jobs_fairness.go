package systems

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
)

var _ FairnessMeasurer = (*jobsSystem)(nil)

type tenantRun struct {
	Tenant string
	I      int
}

func (s *jobsSystem) Fairness(ctx context.Context, spec FairnessSpec) (Measure, error) {
	// The claim order is the engine's, and A's backlog lands before any worker has declared the
	// job: replace the engine Setup started with one that accepts it.
	if err := s.eng.Stop(ctx); err != nil {
		return nil, err
	}
	var err error
	s.eng, err = engine.New(engine.Config{Store: s.st, Logger: quietLogger(),
		OldestFirst: spec.OldestFirst, AllowUndeclared: true})
	if err != nil {
		return nil, err
	}
	if err := s.eng.Start(ctx); err != nil {
		return nil, err
	}
	var (
		mu       sync.Mutex
		enqueued = make(map[int]time.Time, FairnessNewcomers)
		started  = make(map[int]time.Time, FairnessNewcomers)
	)
	def := jobs.MustDefine("tenant-import", func(r tenantRun) string { return fmt.Sprintf("%s-%d", r.Tenant, r.I) },
		jobs.TenantFrom(func(r tenantRun) string { return r.Tenant }),
		func(c *jobs.Ctx, r tenantRun) (int, error) {
			if r.Tenant == "b" {
				now := time.Now()
				mu.Lock()
				if _, ok := started[r.I]; !ok {
					started[r.I] = now
				}
				mu.Unlock()
			}
			return 0, nil
		})
	// A's backlog goes in before any worker runs, as an import would land, so B arrives behind
	// all of it. Many producers, as the other scenarios enqueue.
	producers := max(spec.Concurrency, 1)
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Go(func() {
			for i := p; i < spec.Backlog; i += producers {
				if _, err := def.Enqueue(ctx, s.eng, tenantRun{"a", i}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	total := int64(spec.Backlog + FairnessNewcomers)

	return func(ctx context.Context) (Result, error) {
		if err := s.startWorker(ctx, def, spec.Concurrency); err != nil {
			return Result{}, err
		}
		for i := range FairnessNewcomers {
			mu.Lock()
			enqueued[i] = time.Now()
			mu.Unlock()
			if _, err := def.Enqueue(ctx, s.eng, tenantRun{"b", i}); err != nil {
				return Result{}, err
			}
		}
		if err := awaitCount(ctx, total, s.completed.Load); err != nil {
			return Result{}, err
		}
		mu.Lock()
		defer mu.Unlock()
		waits := make([]time.Duration, 0, FairnessNewcomers)
		for i, at := range enqueued {
			st, ok := started[i]
			if !ok {
				return Result{}, fmt.Errorf("tenant b's run %d completed without starting", i)
			}
			waits = append(waits, st.Sub(at))
		}
		return Result{Units: int(s.completed.Load()), Backend: s.backend, Lags: waits}, nil
	}, nil
}
