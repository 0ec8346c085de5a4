package systems

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
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
	// done holds each worker process's count of acknowledged completions, as it last reported
	// it on its stdout (see RemoteWorkerMain).
	done []*atomic.Int64
	// reg is the server's metrics registry; diagnose reads the engine's histograms from it.
	reg *prometheus.Registry
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
	quiet := quietLogger()
	// BENCH_JOBS_OVERLAP_AT as for the in-process engine (jobs.go): the remote engine's group
	// commit sees its records more spread out, so its threshold is worth trying apart.
	overlapAt, _ := strconv.Atoi(os.Getenv("BENCH_JOBS_OVERLAP_AT"))
	// BENCH_JOBS_GATHER_WAIT sets the engine's GatherWait (a duration; negative turns the gather
	// off): a remote run's next record comes back a network hop later than an in-process one's.
	gatherWait, _ := time.ParseDuration(os.Getenv("BENCH_JOBS_GATHER_WAIT"))
	if s.eng, err = engine.New(engine.Config{Store: s.st, Logger: quiet, OverlapAt: overlapAt,
		GatherWait: gatherWait}); err != nil {
		return err
	}
	if err := s.eng.Start(ctx); err != nil {
		return err
	}
	s.reg = prometheus.NewRegistry()
	if s.srv, err = api.NewServer(api.Config{Engine: s.eng, Addr: "127.0.0.1:0", Logger: quiet, Registerer: s.reg}); err != nil {
		return err
	}
	if err := s.srv.Start(ctx); err != nil {
		return err
	}
	// The counts are checked against the runs table once the workers reported them all: one
	// connection.
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
		rd := bufio.NewReader(out)
		line, err := rd.ReadString('\n')
		if err != nil || line != "ready\n" {
			return fmt.Errorf("worker process %d: %q, %v", i, line, err)
		}
		done := &atomic.Int64{}
		s.done = append(s.done, done)
		go func() {
			for {
				line, err := rd.ReadString('\n')
				if err != nil {
					return
				}
				if n, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64); err == nil {
					done.Store(n)
				}
			}
		}()
	}
	return nil
}

// completed is the sum of the worker processes' acknowledged completions.
func (s *remoteSystem) completed() int64 {
	var n int64
	for _, d := range s.done {
		n += d.Load()
	}
	return n
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
	// Completions are counted where the in-process system counts them, at the seam (each worker
	// process counts the completions the engine acknowledged and reports its count): polling
	// the runs table instead cost Postgres a count of up to n rows every few milliseconds, CPU
	// the in-process row does not pay. The table confirms the count once, at the end.
	if err := awaitCount(ctx, int64(n), s.completed); err != nil {
		return err
	}
	var done int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM jobs.runs WHERE state = 'completed'`).Scan(&done); err != nil {
		return err
	}
	if done != n {
		return fmt.Errorf("the workers acknowledged %d completions, the runs table holds %d", s.completed(), done)
	}
	s.diagnose()
	return nil
}

// diagnose prints, with BENCH_REMOTE_PROFILE set, how long a step record waited in the engine
// (arrival to commit) and the group commits' sizes: set beside the workers' own view of a
// record's round trip (RemoteWorkerMain), the difference is what the HTTP hop costs.
func (s *remoteSystem) diagnose() {
	f := diagFile("engine")
	if f == nil {
		return
	}
	defer f.Close()
	mfs, err := s.reg.Gather()
	if err != nil {
		return
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "jobs_step_commit_seconds", "jobs_commit_batch_size", "jobs_commit_duration_seconds":
			for _, m := range mf.GetMetric() {
				if h := m.GetHistogram(); h != nil && h.GetSampleCount() > 0 {
					fmt.Fprintf(f, "remote engine: %s mean %.4g over %d\n", mf.GetName(),
						h.GetSampleSum()/float64(h.GetSampleCount()), h.GetSampleCount())
				}
			}
		}
	}
}

func (s *remoteSystem) NoopJobs(ctx context.Context, n, concurrency int) (Result, error) {
	if err := s.run(ctx, remoteNoop, n, concurrency); err != nil {
		return Result{}, err
	}
	return Result{Units: n, Backend: "postgres"}, nil
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

// diagFile creates $BENCH_REMOTE_PROFILE/<what>-<pid>.txt for a diagnosis (the bench's child
// processes' output is not shown); nil without the variable.
func diagFile(what string) *os.File {
	dir := os.Getenv("BENCH_REMOTE_PROFILE")
	if dir == "" {
		return nil
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.txt", what, os.Getpid())))
	if err != nil {
		return nil
	}
	return f
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
	// Records, heartbeats and history reads as frames on upgraded connections (api/frames.go).
	client, err := api.NewClient(args[0], "")
	if err != nil {
		return err
	}
	defer client.Close()
	reg, err := jobs.NewRegistry(remoteNoop, remoteTenStep)
	if err != nil {
		return err
	}
	// Each acknowledged record that moved the completion count wakes the reporter below.
	var completed, steps, historyRead, kicked atomic.Int64
	kick := make(chan struct{}, 1)
	var fe frontend.Frontend = counting{Frontend: client, completed: &completed, steps: &steps,
		historyRead: &historyRead, onRecord: func(frontend.RecordRequest) {
			if n := completed.Load(); kicked.Swap(n) != n {
				select {
				case kick <- struct{}{}:
				default:
				}
			}
		}}
	var lat *latencies
	if os.Getenv("BENCH_REMOTE_PROFILE") != "" {
		lat = &latencies{}
		fe = timed{Frontend: fe, lat: lat}
	}
	w, err := worker.New(worker.Config{Frontend: fe, Registry: reg, Concurrency: conc,
		ClaimLinger: claimLinger(), Logger: quietLogger()})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := w.Start(ctx); err != nil {
		return err
	}
	stop := profile("worker")
	fmt.Println("ready")
	// Report the count of acknowledged completions when it changed: woken by the completions
	// themselves, so an idle worker process costs the machine nothing.
	quit := make(chan struct{})
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		last := int64(-1)
		for {
			select {
			case <-quit:
				return
			case <-kick:
			}
			if n := completed.Load(); n != last {
				fmt.Println(n)
				last = n
			}
		}
	}()
	_, _ = io.Copy(io.Discard, os.Stdin)
	close(quit)
	<-reported
	stop()
	if lat != nil {
		lat.print()
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return w.Stop(sctx)
}

// latencies sums the worker's view of its calls' round trips (a diagnosis aid, with
// BENCH_REMOTE_PROFILE).
type latencies struct {
	pollN, pollNs, pollTasks, recN, recNs atomic.Int64
}

func (l *latencies) print() {
	f := diagFile("worker")
	if f == nil {
		return
	}
	defer f.Close()
	mean := func(ns, n int64) float64 { return float64(ns) / float64(max(n, 1)) / 1e6 }
	fmt.Fprintf(f, "remote worker %d: %d polls, mean %.3f ms, %.2f tasks each; %d records, mean %.3f ms\n",
		os.Getpid(), l.pollN.Load(), mean(l.pollNs.Load(), l.pollN.Load()),
		float64(l.pollTasks.Load())/float64(max(l.pollN.Load(), 1)), l.recN.Load(), mean(l.recNs.Load(), l.recN.Load()))
}

// timed times a worker's polls and records.
type timed struct {
	frontend.Frontend
	lat *latencies
}

func (t timed) Poll(ctx context.Context, req frontend.PollRequest) ([]frontend.Task, error) {
	t0 := time.Now()
	tasks, err := t.Frontend.Poll(ctx, req)
	t.lat.pollN.Add(1)
	t.lat.pollNs.Add(int64(time.Since(t0)))
	t.lat.pollTasks.Add(int64(len(tasks)))
	return tasks, err
}

func (t timed) Record(ctx context.Context, req frontend.RecordRequest) (frontend.RecordResponse, error) {
	t0 := time.Now()
	resp, err := t.Frontend.Record(ctx, req)
	t.lat.recN.Add(1)
	t.lat.recNs.Add(int64(time.Since(t0)))
	return resp, err
}
