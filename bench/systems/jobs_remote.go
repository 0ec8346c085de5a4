package systems

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/postgres"
	"github.com/ultimat3/jobs/worker"
)

// Remote workers: the engine serves its HTTP API in the bench process and the jobs run in two
// worker processes that reach it only over the msgpack worker protocol (api.Client), the way
// most deployments run. The callers enqueue in the engine's process, as the in-process system's
// do, so the two rows differ only in where the workers are.

func init() {
	Register("jobs_remote", func() System { return &remoteSystem{} })
}

// RemoteWorkerArg is the first argument that makes the bench binary a remote worker process
// (see RemoteWorkerMain).
const RemoteWorkerArg = "remote-worker"

// remoteProcs is the number of worker processes; the concurrency is split between them.
const remoteProcs = 2

var (
	remoteNoop = jobs.MustDefine("noop", func(i int) string { return fmt.Sprint(i) }, jobs.NoTenant[int](),
		func(*jobs.Ctx, int) (int, error) { return 0, nil })
	remoteTenStep = jobs.MustDefine("tenstep", func(i int) string { return fmt.Sprint(i) }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, in int) (int, error) {
			for i := 0; i < 10; i++ {
				if _, err := jobs.Step(c, stepNames[i], func(context.Context) (int, error) { return i, nil }); err != nil {
					return 0, err
				}
			}
			return in, nil
		})
)

type remoteSystem struct {
	st    store.Store
	eng   *engine.Engine
	srv   *api.Server
	pool  *pgxpool.Pool
	procs []*exec.Cmd
	stdin []io.WriteCloser
}

func (s *remoteSystem) Name() string {
	return fmt.Sprintf("jobs (remote: HTTP API + %d worker processes)", remoteProcs)
}
func (s *remoteSystem) Module() string { return "github.com/ultimat3/jobs" }

func (s *remoteSystem) Setup(ctx context.Context, env Env) error {
	var err error
	if s.st, err = postgres.Open(ctx, postgres.Config{URL: env.DatabaseURL, Schema: "jobs", MaxConns: env.PoolSize}); err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if s.eng, err = engine.New(engine.Config{Store: s.st, Logger: quiet}); err != nil {
		return err
	}
	if err := s.eng.Start(ctx); err != nil {
		return err
	}
	if s.srv, err = api.NewServer(api.Config{Engine: s.eng, Addr: "127.0.0.1:0", Logger: quiet}); err != nil {
		return err
	}
	if err := s.srv.Start(ctx); err != nil {
		return err
	}
	// The completion count is read from the runs table (the workers are elsewhere): one
	// connection, polled.
	cfg, err := pgxpool.ParseConfig(env.DatabaseURL)
	if err != nil {
		return err
	}
	cfg.MaxConns = 1
	s.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	return err
}

// startWorkers starts the worker processes and returns once each has declared its jobs.
func (s *remoteSystem) startWorkers(ctx context.Context, concurrency int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	url := "http://" + s.srv.Addr()
	for i := 0; i < remoteProcs; i++ {
		c := max(1, concurrency/remoteProcs)
		if i == 0 {
			c = max(1, concurrency-(remoteProcs-1)*(concurrency/remoteProcs))
		}
		cmd := exec.Command(self, RemoteWorkerArg, url, strconv.Itoa(c))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		s.procs, s.stdin = append(s.procs, cmd), append(s.stdin, in)
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "ready\n" {
			return fmt.Errorf("worker process %d: %q, %v", i, line, err)
		}
	}
	return nil
}

// run enqueues n runs from `concurrency` producers in the engine's process and returns when the
// runs table holds n completed runs.
func (s *remoteSystem) run(ctx context.Context, def *jobs.Job[int, int], n, concurrency int) error {
	if err := s.startWorkers(ctx, concurrency); err != nil {
		return err
	}
	defer profile("engine")()
	var wg sync.WaitGroup
	errs := make(chan error, concurrency)
	for p := 0; p < concurrency; p++ {
		wg.Go(func() {
			for i := p; i < n; i += concurrency {
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
		return err
	}
	for {
		var done int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM jobs.runs WHERE state = 'completed'`).Scan(&done); err != nil {
			return err
		}
		if done >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d runs completed: %w", done, n, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (s *remoteSystem) NoopJobs(ctx context.Context, n, concurrency int) (Result, error) {
	if err := s.run(ctx, remoteNoop, n, concurrency); err != nil {
		return Result{}, err
	}
	return Result{Units: n, Backend: "postgres", Note: "completions counted by polling the runs table every 5 ms"}, nil
}

func (s *remoteSystem) TenStep(ctx context.Context, runs, concurrency int) (Result, error) {
	if err := s.run(ctx, remoteTenStep, runs, concurrency); err != nil {
		return Result{}, err
	}
	var steps int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM jobs.history WHERE kind = 'StepCompleted'`).Scan(&steps); err != nil {
		return Result{}, err
	}
	if steps != runs*10 {
		return Result{}, fmt.Errorf("%d steps recorded, want %d", steps, runs*10)
	}
	return Result{Units: runs, Steps: steps, Backend: "postgres"}, nil
}

func (s *remoteSystem) Close() error {
	for _, in := range s.stdin {
		_ = in.Close() // the worker stops when its stdin closes
	}
	for _, cmd := range s.procs {
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.srv != nil {
		_ = s.srv.Stop(ctx)
	}
	if s.eng != nil {
		_ = s.eng.Stop(ctx)
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.st != nil {
		return s.st.Close()
	}
	return nil
}

// profile writes a CPU profile of this process to $BENCH_REMOTE_PROFILE/<what>-<pid>.pprof when
// that variable names a directory (a diagnosis aid: where the remote path spends its CPU); the
// returned function stops it.
func profile(what string) func() {
	dir := os.Getenv("BENCH_REMOTE_PROFILE")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", what, os.Getpid())))
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// RemoteWorkerMain is a remote worker process: args are the engine's URL and the concurrency.
// It hosts the no-op and ten-step jobs, prints "ready" once started, and stops when its stdin
// closes.
func RemoteWorkerMain(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: %s URL CONCURRENCY", RemoteWorkerArg)
	}
	conc, err := strconv.Atoi(args[1])
	if err != nil {
		return err
	}
	client, err := api.NewClient(args[0], "")
	if err != nil {
		return err
	}
	defer client.Close()
	reg, err := jobs.NewRegistry(remoteNoop, remoteTenStep)
	if err != nil {
		return err
	}
	w, err := worker.New(worker.Config{Frontend: client, Registry: reg, Concurrency: conc,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := w.Start(ctx); err != nil {
		return err
	}
	stop := profile("worker")
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	stop()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return w.Stop(sctx)
}
