package systems

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/replay"
	"github.com/ultimat3/jobs/store"
)

// Scenario 5: replaying long histories, in memory (replay.Check) and for real (a run with a long
// recorded history resumes on a fresh worker, which reads the history from the store and replays
// it before the run can go on).

var _ Replayer = (*jobsSystem)(nil)

// longJob is a job whose body calls n steps named names[0..n), counting the calls that returned
// and the step functions that ran live (a replay runs none).
type longJob struct {
	def   *jobs.Job[int, int]
	names []string
	calls atomic.Int64
	live  atomic.Int64
}

func newLongJob(name string, n int) *longJob {
	l := &longJob{names: make([]string, n)}
	for i := range l.names {
		l.names[i] = fmt.Sprintf("s%d", i)
	}
	l.def = jobs.MustDefine(name, func(int) string { return name }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, in int) (int, error) {
			for _, step := range l.names {
				if _, err := jobs.Step(c, step, func(context.Context) (int, error) {
					l.live.Add(1)
					return 0, nil
				}); err != nil {
					return 0, err
				}
				l.calls.Add(1)
			}
			return in, nil
		})
	return l
}

// stepEvents is the history after RunStarted of a run that completed n steps: one StepCompleted
// per step, each with a small encoded output, as a no-op step records it.
func (l *longJob) stepEvents(at time.Time) ([]history.Event, error) {
	out, err := jobs.Encode(7)
	if err != nil {
		return nil, err
	}
	events := make([]history.Event, len(l.names))
	for i, name := range l.names {
		events[i] = history.New(at, history.StepCompleted{StepName: name, Output: out})
	}
	return events, nil
}

func (s *jobsSystem) ReplayCheck(ctx context.Context, n int) (Measure, error) {
	l := newLongJob("replay", n)
	at := time.Now().UTC()
	in, err := jobs.Encode(1)
	if err != nil {
		return nil, err
	}
	steps, err := l.stepEvents(at)
	if err != nil {
		return nil, err
	}
	events := append([]history.Event{history.New(at, history.RunStarted{Job: l.def.Name(), Queue: jobs.DefaultQueue,
		Input: in, Key: l.def.Name(), NoTenant: true})}, steps...)
	for i := range events {
		events[i].Seq = int64(i + 1)
	}
	// One untimed pass: it proves the history replays to the end and warms the code paths.
	if err := replay.Check(ctx, l.def, events); err != nil {
		return nil, fmt.Errorf("warm-up pass: %w", err)
	}
	if got := l.calls.Load(); got != int64(n) {
		return nil, fmt.Errorf("warm-up pass: the body got %d of %d recorded steps back", got, n)
	}
	runtime.GC()

	return func(ctx context.Context) (Result, error) {
		l.calls.Store(0)
		// As testing.B does: at least a second and at least three passes.
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		t0 := time.Now()
		passes := 0
		for passes < 3 || time.Since(t0) < time.Second {
			if err := replay.Check(ctx, l.def, events); err != nil {
				return Result{}, err
			}
			passes++
		}
		runtime.ReadMemStats(&after)
		if got, want := l.calls.Load(), int64(n*passes); got != want {
			return Result{}, fmt.Errorf("%d passes returned %d recorded steps, want %d", passes, got, want)
		}
		if l.live.Load() != 0 {
			return Result{}, fmt.Errorf("replay ran %d steps live", l.live.Load())
		}
		return Result{Units: n, Events: n * passes, Backend: "in memory (no store)",
			AllocBytes: after.TotalAlloc - before.TotalAlloc, Allocs: after.Mallocs - before.Mallocs}, nil
	}, nil
}

// resumeBatch is how many events one preloading RunApply appends.
const resumeBatch = 5000

func (s *jobsSystem) Resume(ctx context.Context, n int) (Measure, error) {
	l := newLongJob("resume", n)
	now := time.Now().UTC()
	in, err := jobs.Encode(1)
	if err != nil {
		return nil, err
	}
	id := fmt.Sprintf("resume-%d", now.UnixNano())
	run := store.Run{ID: id, Job: l.def.Name(), Queue: jobs.DefaultQueue, Key: l.def.Name(), NoTenant: true,
		Input: in, State: store.StateReady, Attempt: 1, ReadyAt: now, CreatedAt: now, UpdatedAt: now}
	started := history.New(now, history.RunStarted{Job: run.Job, Queue: run.Queue, Input: in, Key: run.Key, NoTenant: true})
	if _, err := s.st.RunCreate(ctx, []store.CreateRunParams{{Run: run, Started: started}}); err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	// Claim it under a worker id of our own with a long lease, as the worker that recorded the
	// history would have held it, then append the history in batches under that claim.
	claimed, err := s.st.RunClaim(ctx, store.ClaimParams{WorkerID: "bench-preload", Queues: []string{run.Queue},
		Limit: 1, Now: now, LeaseUntil: now.Add(time.Hour), StickyBefore: now})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	if len(claimed) != 1 || claimed[0].ID != id {
		return nil, fmt.Errorf("claim: got %d runs, want run %s", len(claimed), id)
	}
	fence := claimed[0].Fence
	steps, err := l.stepEvents(now)
	if err != nil {
		return nil, err
	}
	apply := func(m store.Mutation) error {
		res, err := s.st.RunApply(ctx, []store.Mutation{m})
		if err == nil && len(res) == 1 {
			err = res[0].Err
		}
		return err
	}
	for len(steps) > 0 {
		batch := steps[:min(resumeBatch, len(steps))]
		steps = steps[len(batch):]
		if err := apply(store.Mutation{RunID: id, Fence: fence, Now: time.Now().UTC(), Events: batch}); err != nil {
			return nil, fmt.Errorf("append history: %w", err)
		}
	}
	// Hand the claim back: the run is ready, with no worker, as after a crash whose lease lapsed.
	t := time.Now().UTC()
	if err := apply(store.Mutation{RunID: id, Fence: fence, Now: t,
		Transition: store.Transition{State: store.StateReady, ReadyAt: t}}); err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	r, err := s.st.RunGet(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.State != store.StateReady || r.LastSeq != int64(n+1) {
		return nil, fmt.Errorf("preloaded run is %s with last seq %d, want ready with %d", r.State, r.LastSeq, n+1)
	}
	runtime.GC()

	return func(ctx context.Context) (Result, error) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := s.startWorker(ctx, l.def, 1); err != nil {
			return Result{}, err
		}
		for s.completed.Load() < 1 {
			if ctx.Err() != nil {
				return Result{}, fmt.Errorf("the run did not complete (%d of %d steps replayed): %w", l.calls.Load(), n, ctx.Err())
			}
			time.Sleep(100 * time.Microsecond)
		}
		runtime.ReadMemStats(&after)
		if got := l.calls.Load(); got != int64(n) {
			return Result{}, fmt.Errorf("the body got %d of %d recorded steps back", got, n)
		}
		if l.live.Load() != 0 || s.steps.Load() != 0 {
			return Result{}, fmt.Errorf("%d steps ran live (%d recorded): the history was not replayed", l.live.Load(), s.steps.Load())
		}
		return Result{Units: n, Events: n, Backend: s.backend, HistoryRead: time.Duration(s.historyRead.Load()),
			AllocBytes: after.TotalAlloc - before.TotalAlloc, Allocs: after.Mallocs - before.Mallocs}, nil
	}, nil
}
