package systems

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// River is measured twice: at its defaults, where FetchCooldown (100 ms) and FetchPollInterval
// (1 s) cap a queue at about MaxWorkers jobs per cooldown, and with the settings River's own
// benchmark uses, which is the figure to compare against.
func init() {
	Register("river_defaults", func() System { return &riverSystem{} })
	Register("river_tuned", func() System {
		return &riverSystem{tuned: true, cooldown: 2 * time.Millisecond, poll: 20 * time.Millisecond}
	})
}

type riverSystem struct {
	tuned          bool
	cooldown, poll time.Duration

	pool   *pgxpool.Pool
	dbURL  string // the run's database (river_drain.go)
	client *river.Client[pgx.Tx]
	events <-chan *river.Event
	unsub  func()
}

// noopArgs is the job's (empty) payload; Kind is what River routes workers by.
type noopArgs struct{}

func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

func (s *riverSystem) Name() string {
	if s.tuned {
		return fmt.Sprintf("river (tuned: FetchCooldown %s, FetchPollInterval %s)", s.cooldown, s.poll)
	}
	return "river (defaults)"
}

func (s *riverSystem) Module() string { return "github.com/riverqueue/river" }

func (s *riverSystem) Skip(scenario string) string {
	if scenario == ScenarioTenStep {
		return "River is a job queue with no multi-step workflow primitive"
	}
	if scenario == ScenarioBulk && !s.tuned {
		return "InsertMany does not depend on the fetch settings: see the tuned row"
	}
	if DrainWorkers(scenario) > 0 && !s.tuned {
		return "the default fetch settings cap a queue at MaxWorkers jobs per 100 ms: see the tuned row"
	}
	return ""
}

func (s *riverSystem) Setup(ctx context.Context, env Env) error {
	s.dbURL = env.DatabaseURL
	// Migrate on a pool of its own that is closed before the measured window, so the DDL's
	// statistics are flushed (at backend exit) before the harness takes its baseline.
	mpool, err := newPool(ctx, env.DatabaseURL, 2)
	if err != nil {
		return err
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(mpool), &rivermigrate.Config{Logger: quietLogger()})
	if err != nil {
		mpool.Close()
		return fmt.Errorf("river migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		mpool.Close()
		return fmt.Errorf("river migrate: %w", err)
	}
	mpool.Close()

	if s.pool, err = newPool(ctx, env.DatabaseURL, env.PoolSize); err != nil {
		return err
	}
	return nil
}

// start builds and starts the client once the concurrency is known (it sets MaxWorkers).
func (s *riverSystem) start(ctx context.Context, workers, n int) error {
	w := river.NewWorkers()
	if err := river.AddWorkerSafely(w, &noopWorker{}); err != nil {
		return err
	}
	cfg := &river.Config{
		Logger:  quietLogger(),
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers: w,
	}
	if s.tuned {
		cfg.FetchCooldown = s.cooldown
		cfg.FetchPollInterval = s.poll
	}
	client, err := river.NewClient(riverpgxv5.New(s.pool), cfg)
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	// Events that overflow the subscription's buffer are dropped, so size it for every job.
	s.events, s.unsub = client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: n + 1024,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
	})
	s.client = client
	return client.Start(ctx)
}

func (s *riverSystem) NoopJobs(ctx context.Context, n, concurrency int) (Result, error) {
	if err := s.start(ctx, concurrency, n); err != nil {
		return Result{}, err
	}

	// Count completions as they arrive, concurrently with the inserts, so the channel never
	// fills and the count stops the clock as soon as the last job is done.
	done := make(chan error, 1)
	go func() {
		completed := 0
		for completed < n {
			select {
			case ev := <-s.events:
				if ev.Kind != river.EventKindJobCompleted {
					done <- fmt.Errorf("job %d ended with event %s", ev.Job.ID, ev.Kind)
					return
				}
				completed++
			case <-ctx.Done():
				done <- fmt.Errorf("after %d of %d completions: %w", completed, n, ctx.Err())
				return
			}
		}
		done <- nil
	}()

	// One job per insert call, from `concurrency` producers: the shape of an application that
	// enqueues a job per request, and the same load shape as the other systems' callers.
	if _, err := ClosedLoop(ctx, n, concurrency, func(ctx context.Context, _ int) error {
		_, err := s.client.Insert(ctx, noopArgs{}, nil)
		return err
	}); err != nil {
		return Result{}, fmt.Errorf("insert: %w", err)
	}
	if err := <-done; err != nil {
		return Result{}, err
	}

	return s.checked(ctx, n)
}

// checked is the result of a run whose n completion events arrived: the events are the clock,
// the table is the check.
func (s *riverSystem) checked(ctx context.Context, n int) (Result, error) {
	var completed int
	if err := s.pool.QueryRow(ctx,
		`SELECT count(*) FROM river_job WHERE kind = 'bench_noop' AND state = 'completed'`).Scan(&completed); err != nil {
		return Result{}, fmt.Errorf("check table: %w", err)
	}
	if completed != n {
		return Result{}, fmt.Errorf("%d completion events but %d completed rows in river_job", n, completed)
	}
	note := ""
	if !s.tuned {
		note = "defaults: FetchCooldown 100ms, FetchPollInterval 1s"
	}
	return Result{Units: completed, Backend: "postgres (pgx v5)", Note: note}, nil
}

func (s *riverSystem) TenStep(context.Context, int, int) (Result, error) {
	return Result{}, Unsupported(s.Skip(ScenarioTenStep))
}

func (s *riverSystem) Close() error {
	var errs []error
	if s.client != nil {
		if s.unsub != nil {
			s.unsub()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		errs = append(errs, s.client.Stop(ctx))
		cancel()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	return errors.Join(errs...)
}
