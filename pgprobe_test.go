package jobs_test

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// timedStore measures where a store call's time goes.
type timedStore struct {
	store.Store
	mu    sync.Mutex
	calls map[string]*[3]int64 // count, total ns, items
}

func (s *timedStore) note(name string, start time.Time, items int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls[name]
	if c == nil {
		c = &[3]int64{}
		s.calls[name] = c
	}
	c[0]++
	c[1] += int64(time.Since(start))
	c[2] += int64(items)
}

func (s *timedStore) RunApply(ctx context.Context, ms []store.Mutation) ([]store.MutationResult, error) {
	t := time.Now()
	defer func() { s.note("apply", t, len(ms)) }()
	return s.Store.RunApply(ctx, ms)
}
func (s *timedStore) RunClaim(ctx context.Context, p store.ClaimParams) ([]store.Run, error) {
	t := time.Now()
	r, err := s.Store.RunClaim(ctx, p)
	s.note("claim", t, len(r))
	return r, err
}
func (s *timedStore) HistoryRead(ctx context.Context, id string, after int64, limit int) ([]history.Event, error) {
	t := time.Now()
	r, err := s.Store.HistoryRead(ctx, id, after, limit)
	s.note("history", t, len(r))
	return r, err
}
func (s *timedStore) RunCreate(ctx context.Context, p []store.CreateRunParams) ([]store.CreateRunResult, error) {
	t := time.Now()
	defer func() { s.note("create", t, len(p)) }()
	return s.Store.RunCreate(ctx, p)
}

func TestProbeTenStepPostgres(t *testing.T) {
	if os.Getenv("JOBS_PROBE") == "" {
		t.Skip("a measurement, not a test: JOBS_PROBE=1")
	}
	ts := &timedStore{Store: testenv.OpenPostgres(t), calls: map[string]*[3]int64{}}
	env := testenv.Start(t, testenv.Options{Store: ts, Clock: clock.Real{}})
	var done atomic.Int64
	j := tenSteps(&done)
	env.Worker(worker.Config{Concurrency: 32}, j)
	start := time.Now()
	const n = 2000
	var wg sync.WaitGroup
	for p := 0; p < 32; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < n; i += 32 {
				j.Enqueue(context.Background(), env.Engine, i)
			}
		}()
	}
	wg.Wait()
	for done.Load() < n {
		time.Sleep(time.Millisecond)
	}
	el := time.Since(start)
	t.Logf("%d runs in %s: %.0f steps/s", n, el, float64(n*10)/el.Seconds())
	for k, c := range ts.calls {
		t.Logf("%-8s calls %6d  avg %6.2f ms  avg items %6.1f  busy %4.0f%%", k, c[0], float64(c[1])/float64(c[0])/1e6, float64(c[2])/float64(c[0]), 100*float64(c[1])/float64(el))
	}
}
