package systems

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
)

// Scenario 6: timer lag. Every run sleeps once, until a due time of its own, and then runs a step
// that notes when it started; the lag of a timer is that moment minus the wake-up time the sleep
// recorded.

var _ TimerLagger = (*jobsSystem)(nil)

func (s *jobsSystem) TimerLag(ctx context.Context, spec TimerSpec) (Measure, error) {
	n := spec.Timers
	if n < 1 || spec.Window <= 0 || spec.Lead <= 0 {
		return nil, fmt.Errorf("timers: bad spec %+v", spec)
	}
	spacing := spec.Window / time.Duration(n)

	var (
		mu     sync.Mutex
		wakeAt = make(map[string]time.Time, n) // run id → the wake-up time its sleep recorded
		fired  = make(map[string]time.Time, n) // run id → when the step after the sleep started
		slack  = time.Duration(1<<63 - 1)
		armed  atomic.Int64
	)
	// The sleep's wake-up time is read where the worker hands it to the engine, once the engine
	// has acknowledged it: that is the due time the timer service works to, to the nanosecond.
	s.onRecord = func(req frontend.RecordRequest) {
		for _, cmd := range req.Commands {
			if cmd.Kind == frontend.CmdSleep {
				left := time.Until(cmd.WakeAt)
				mu.Lock()
				wakeAt[req.RunID] = cmd.WakeAt
				slack = min(slack, left)
				mu.Unlock()
				armed.Add(1)
			}
		}
	}
	// Every parked run stays parked, so a wake-up resumes its body without a replay, as it
	// would on a worker with room for them.
	s.stickyRuns = max(n, 10_000)

	var t0 time.Time // set before the first enqueue; the bodies only read it
	def := jobs.MustDefine("sleeper", func(i int) string { return fmt.Sprint(i) }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, i int) (int, error) {
			due := t0.Add(time.Duration(i) * spacing)
			if err := jobs.Sleep(c, "wake", time.Until(due)); err != nil {
				return 0, err
			}
			if _, err := jobs.Step(c, "fired", func(context.Context) (int, error) {
				now := time.Now()
				mu.Lock()
				fired[c.Run().RunID] = now
				mu.Unlock()
				return 0, nil
			}); err != nil {
				return 0, err
			}
			return i, nil
		})
	if err := s.startWorker(ctx, def, spec.Concurrency); err != nil {
		return nil, err
	}

	start := time.Now()
	t0 = start.Add(spec.Lead)
	// Enqueue in due order (roughly: one producer per in-flight slot, as the other scenarios).
	producers := max(spec.Concurrency, 1)
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Go(func() {
			for i := p; i < n; i += producers {
				if _, err := def.Enqueue(ctx, s.eng, i); err != nil {
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
	// Every run must be asleep before the first one is due, or the window would mix arming
	// and firing and a late-armed timer would count its backlog as lag.
	for armed.Load() < int64(n) {
		if time.Now().After(t0) {
			return nil, fmt.Errorf("only %d of %d runs had reached their sleep when the first was due, %s after the first enqueue; raise BENCH_TIMER_LEAD",
				armed.Load(), n, spec.Lead)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		time.Sleep(time.Millisecond)
	}
	arm := time.Since(start)
	mu.Lock()
	minSlack := slack
	mu.Unlock()
	// The timed window opens just before the first wake-up, so its CPU figure is the firing's.
	if d := time.Until(t0.Add(-100 * time.Millisecond)); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}

	return func(ctx context.Context) (Result, error) {
		if err := awaitCount(ctx, int64(n), s.completed.Load); err != nil {
			return Result{}, err
		}
		mu.Lock()
		defer mu.Unlock()
		// In due order: whether the lag is the early runs', the late ones' or a burst's is part
		// of the finding.
		type due struct{ at, fired time.Time }
		dues := make([]due, 0, n)
		for id, f := range fired {
			w, ok := wakeAt[id]
			if !ok {
				return Result{}, fmt.Errorf("run %s fired with no sleep recorded", id)
			}
			dues = append(dues, due{w, f})
		}
		slices.SortFunc(dues, func(a, b due) int { return a.at.Compare(b.at) })
		lags := make([]time.Duration, 0, n)
		for _, d := range dues {
			lags = append(lags, d.fired.Sub(d.at))
		}
		if len(lags) != n {
			return Result{}, fmt.Errorf("%d of %d runs recorded their firing", len(lags), n)
		}
		return Result{Units: int(s.completed.Load()), Backend: s.backend, Lags: lags, Arm: arm, Slack: minSlack}, nil
	}, nil
}
