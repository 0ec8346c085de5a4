package systems

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
)

// DBOS Transact is driven through its fast path: RunWorkflow + GetResult from N goroutines, which
// runs the workflow in the caller's process. Its queue mode polls every second by default and is
// not used.
func init() {
	Register("dbos", func() System { return &dbosSystem{} })
}

type dbosSystem struct {
	dctx dbos.Context
}

func (s *dbosSystem) Name() string   { return "DBOS Transact Go" }
func (s *dbosSystem) Module() string { return "github.com/dbos-inc/dbos-transact-golang" }

// dbosNoop is a workflow with no steps: the cost measured is the workflow's own bookkeeping.
func dbosNoop(_ dbos.Context, in int) (int, error) { return in, nil }

// dbosStep is the no-op step; a named function so DBOS records a stable step name.
func dbosStep(context.Context) (int, error) { return 1, nil }

// dbosTenStep runs ten durable steps; each is checkpointed before the next starts.
func dbosTenStep(ctx dbos.Context, _ int) (int, error) {
	sum := 0
	for range 10 {
		v, err := dbos.RunAsStep(ctx, dbosStep)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

func (s *dbosSystem) Setup(ctx context.Context, env Env) error {
	// DBOS sizes its own pool (20) unless the URL says otherwise; give it the same size as
	// everyone else.
	u, err := url.Parse(env.DatabaseURL)
	if err != nil {
		return err
	}
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(env.PoolSize))
	u.RawQuery = q.Encode()
	dbURL := u.String()

	// Migrate up front (its connections close when Migrate returns) and launch with
	// SkipMigrations, so schema work stays out of the measured window.
	if err := dbos.Migrate(ctx, dbURL, dbos.WithMigrateLogger(quietLogger())); err != nil {
		return fmt.Errorf("dbos migrate: %w", err)
	}
	dctx, err := dbos.NewContext(ctx, dbos.Config{
		AppName:        "bench",
		DatabaseURL:    dbURL,
		Logger:         quietLogger(),
		SkipMigrations: true,
	})
	if err != nil {
		return fmt.Errorf("dbos context: %w", err)
	}
	dbos.RegisterWorkflow(dctx, dbosNoop)
	dbos.RegisterWorkflow(dctx, dbosTenStep)
	if err := dbos.Launch(dctx); err != nil {
		return fmt.Errorf("dbos launch: %w", err)
	}
	s.dctx = dctx
	return nil
}

// run drives total workflows through wf from `concurrency` callers and checks every result
// against want(i), so a workflow that did not really run cannot be counted.
func (s *dbosSystem) run(ctx context.Context, wf dbos.Workflow[int, int], total, concurrency int, want func(i int) int) (int, error) {
	return ClosedLoop(ctx, total, concurrency, func(ctx context.Context, i int) error {
		h, err := dbos.RunWorkflow(dbos.From(s.dctx, ctx), wf, i)
		if err != nil {
			return err
		}
		got, err := h.GetResult()
		if err != nil {
			return err
		}
		if got != want(i) {
			return fmt.Errorf("workflow %d returned %d, want %d", i, got, want(i))
		}
		return nil
	})
}

func (s *dbosSystem) NoopJobs(ctx context.Context, n, concurrency int) (Result, error) {
	done, err := s.run(ctx, dbosNoop, n, concurrency, func(i int) int { return i })
	if err != nil {
		return Result{}, err
	}
	return Result{Units: done, Backend: "postgres", Note: "workflow with no steps; RunWorkflow+GetResult, no queue"}, nil
}

func (s *dbosSystem) TenStep(ctx context.Context, runs, concurrency int) (Result, error) {
	done, err := s.run(ctx, dbosTenStep, runs, concurrency, func(int) int { return 10 })
	if err != nil {
		return Result{}, err
	}
	return Result{Units: done, Steps: done * 10, Backend: "postgres", Note: "RunWorkflow+GetResult, 10×RunAsStep"}, nil
}

func (s *dbosSystem) Close() error {
	if s.dctx == nil {
		return nil
	}
	return dbos.Shutdown(s.dctx, 30*time.Second)
}
