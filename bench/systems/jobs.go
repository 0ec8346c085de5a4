package systems

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/postgres"
	"github.com/ultimat3/jobs/store/sqlite"
	"github.com/ultimat3/jobs/worker"
)

func init() {
	Register("jobs", func() System { return &jobsSystem{backend: "postgres"} })
	Register("jobs_sqlite", func() System { return &jobsSystem{backend: "sqlite"} })
}

// jobsSystem is our engine, in-process: engine, store and worker in the bench process, the way
// an app embedding the library on Postgres (or on the embedded SQLite file) runs it.
type jobsSystem struct {
	backend string
	st      store.Store
	eng     *engine.Engine
	w       *worker.Worker
	// completed counts runs whose completion the engine acknowledged: counted at the seam, so
	// verifying costs the database nothing.
	completed atomic.Int64
	steps     atomic.Int64

	// historyRead sums the time workers spent reading histories (nanoseconds).
	historyRead atomic.Int64
	// onRecord, when set, sees every acknowledged record request (the timer scenario reads
	// the wake-up times of the sleeps from it).
	onRecord func(frontend.RecordRequest)
	// stickyRuns, when set, sizes the worker's cache of parked runs.
	stickyRuns int
	// dbURL is the run's database; closers run at Close (jobs_backfill.go).
	dbURL   string
	closers []func()
}

func (s *jobsSystem) Name() string {
	if s.backend == "sqlite" {
		return "jobs (embedded SQLite)"
	}
	return "jobs"
}

func (s *jobsSystem) Module() string { return "github.com/ultimat3/jobs" }

func (s *jobsSystem) Skip(scenario string) string { return "" }

func (s *jobsSystem) Setup(ctx context.Context, env Env) error {
	var err error
	s.dbURL = env.DatabaseURL
	if s.backend == "sqlite" {
		s.st, err = sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(env.Dir, "jobs.db")})
	} else {
		s.st, err = postgres.Open(ctx, postgres.Config{URL: env.DatabaseURL, Schema: "jobs", MaxConns: env.PoolSize})
	}
	if err != nil {
		return err
	}
	quiet := quietLogger()
	// BENCH_JOBS_OVERLAP_AT sets the engine's OverlapAt (the group commit's batching policy), for
	// an experiment; unset is the engine's default.
	overlapAt, _ := strconv.Atoi(os.Getenv("BENCH_JOBS_OVERLAP_AT"))
	s.eng, err = engine.New(engine.Config{Store: s.st, Logger: quiet, OverlapAt: overlapAt})
	if err != nil {
		return err
	}
	return s.eng.Start(ctx)
}

// claimLinger is BENCH_JOBS_CLAIM_LINGER, the workers' ClaimLinger (negative: no linger), for an
// experiment; unset is the worker's default. The remote workers read it too.
func claimLinger() time.Duration {
	d, _ := time.ParseDuration(os.Getenv("BENCH_JOBS_CLAIM_LINGER"))
	return d
}

// counting observes acknowledged completions on their way from the worker to the engine.
type counting struct {
	frontend.Frontend
	completed   *atomic.Int64
	steps       *atomic.Int64
	historyRead *atomic.Int64
	onRecord    func(frontend.RecordRequest)
}

// CheapClaims passes the engine's answer on (worker/linger.go): the wrapper must not hide it.
func (c counting) CheapClaims() bool {
	cc, ok := c.Frontend.(frontend.CheapClaims)
	return ok && cc.CheapClaims()
}

func (c counting) History(ctx context.Context, runID string, afterSeq int64) ([]history.Event, error) {
	t0 := time.Now()
	events, err := c.Frontend.History(ctx, runID, afterSeq)
	c.historyRead.Add(int64(time.Since(t0)))
	return events, err
}

func (c counting) Record(ctx context.Context, req frontend.RecordRequest) (frontend.RecordResponse, error) {
	resp, err := c.Frontend.Record(ctx, req)
	if err == nil {
		for _, cmd := range req.Commands {
			switch cmd.Kind {
			case frontend.CmdComplete:
				c.completed.Add(1)
			case frontend.CmdStep:
				c.steps.Add(1)
			}
		}
		if c.onRecord != nil {
			c.onRecord(req) // after the counts, so it sees this record counted
		}
	}
	return resp, err
}

func (s *jobsSystem) startWorker(ctx context.Context, def jobs.Definition, concurrency int) error {
	reg, err := jobs.NewRegistry(def)
	if err != nil {
		return err
	}
	s.w, err = worker.New(worker.Config{
		Frontend: counting{Frontend: s.eng, completed: &s.completed, steps: &s.steps,
			historyRead: &s.historyRead, onRecord: s.onRecord},
		Registry:    reg,
		Concurrency: concurrency,
		StickyRuns:  s.stickyRuns,
		ClaimLinger: claimLinger(),
		Logger:      quietLogger(),
	})
	if err != nil {
		return err
	}
	return s.w.Start(ctx)
}

// run enqueues n runs from `concurrency` producers while the worker executes them, and returns
// when every run's completion was acknowledged.
func (s *jobsSystem) run(ctx context.Context, def *jobs.Job[int, int], n, concurrency int) error {
	// BENCH_REMOTE_PROFILE names a directory for a CPU profile of the window (a diagnosis aid).
	defer profile(fmt.Sprintf("%s%d", def.Name(), concurrency))()
	if err := s.startWorker(ctx, def, concurrency); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, concurrency)
	for p := 0; p < concurrency; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := p; i < n; i += concurrency {
				if _, err := def.Enqueue(ctx, s.eng, i); err != nil {
					errs <- err
					return
				}
			}
		}(p)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return awaitCount(ctx, int64(n), s.completed.Load)
}

func (s *jobsSystem) NoopJobs(ctx context.Context, n, concurrency int) (Result, error) {
	def := jobs.MustDefine("noop", func(i int) string { return fmt.Sprint(i) }, jobs.NoTenant[int](),
		func(*jobs.Ctx, int) (int, error) { return 0, nil })
	if err := s.run(ctx, def, n, concurrency); err != nil {
		return Result{}, err
	}
	return Result{Units: int(s.completed.Load()), Backend: s.backend}, nil
}

func (s *jobsSystem) TenStep(ctx context.Context, runs, concurrency int) (Result, error) {
	def := jobs.MustDefine("tenstep", func(i int) string { return fmt.Sprint(i) }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, in int) (int, error) {
			for i := 0; i < 10; i++ {
				if _, err := jobs.Step(c, stepNames[i], func(context.Context) (int, error) { return i, nil }); err != nil {
					return 0, err
				}
			}
			return in, nil
		})
	if err := s.run(ctx, def, runs, concurrency); err != nil {
		return Result{}, err
	}
	if got := s.steps.Load(); got != int64(runs*10) {
		return Result{}, fmt.Errorf("%d steps recorded, want %d", got, runs*10)
	}
	return Result{Units: int(s.completed.Load()), Steps: int(s.steps.Load()), Backend: s.backend}, nil
}

var stepNames = [10]string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9"}

func (s *jobsSystem) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.w != nil {
		_ = s.w.Stop(ctx)
	}
	if s.eng != nil {
		_ = s.eng.Stop(ctx)
	}
	for _, c := range s.closers {
		c()
	}
	if s.st != nil {
		return s.st.Close()
	}
	return nil
}
