package systems

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store/postgres"
)

// Several engines on one Postgres (`bench multi`): the ten-step workload run by one `engine
// serve` process and then by two, side by side in one invocation, each engine a separate
// process on its own free port with its own worker processes (this binary's remote-worker mode)
// reaching it over the msgpack worker protocol. The callers enqueue over HTTP, spread evenly over
// the engines. The worker slots and the worker processes in total are the same in both shapes
// (by default two: one engine has both, two engines one each), so the second shape measures what
// a second engine process adds, not more workers. With -worker-procs 0 each engine has two, as
// before 2026-12-01 21:00 UTC: the two-engine shape then also ran twice the worker processes,
// each with half the slots, whose smaller claims and commits cost more per step.
//
// With several engines, each runs with GOMAXPROCS at its share of the machine's cores (-share):
// scaled out, each engine would have a host or a container of its own, and Go sizes its
// scheduler from the container's CPU limit. Two engines each sized for both cores of one host
// kept four schedulers' worth of threads spinning for work on two cores (about 10 µs of the
// engines' CPU a step, measured 2026-12-02).
//
// After each run the database is checked: every run completed exactly once (one RunCompleted,
// attempt 1, no AttemptFailed), every history contiguous from seq 1 with the ten steps each.

// MultiResult is one measured shape.
type MultiResult struct {
	Engines          int
	WorkerProcs      int // worker processes in all
	EngineProcs      int // each engine's GOMAXPROCS; 0: the runtime's default (every core)
	Runs             int
	Elapsed          time.Duration
	Failed, Attempts int // AttemptFailed events; runs past their first attempt
	Checked          string
	Cost             MultiCost
}

// MultiMain runs `bench multi`: args are flags -engine (the engine binary), -runs,
// -concurrency, -rounds, -worker-procs, -share.
func MultiMain(args []string) error {
	var (
		engineBin  string
		runs, conc int
		rounds     int
		workers    int
		share      bool
		out        string
	)
	fs := flag.NewFlagSet("multi", flag.ContinueOnError)
	fs.StringVar(&engineBin, "engine", "", "the engine binary (go build ./cmd/engine)")
	fs.IntVar(&runs, "runs", 2000, "ten-step runs per measurement")
	fs.IntVar(&conc, "concurrency", 32, "runs in flight in total (worker slots), split over the worker processes")
	fs.IntVar(&rounds, "rounds", 2, "measurements of each shape, alternating")
	fs.IntVar(&workers, "worker-procs", remoteProcs, "worker processes in total, spread evenly over the engines (at least one each); 0: two per engine")
	fs.BoolVar(&share, "share", true, "with several engines, run each with GOMAXPROCS at its share of the cores (as on hosts of their own); false: each sized to the whole machine")
	fs.StringVar(&out, "out", "", "also write the markdown report here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if engineBin == "" {
		return fmt.Errorf("-engine is required")
	}
	admin := os.Getenv("TEST_DATABASE_URL")
	if admin == "" {
		return fmt.Errorf("TEST_DATABASE_URL is not set")
	}
	ctx := context.Background()
	var results []MultiResult
	for r := 0; r < rounds; r++ {
		for _, engines := range []int{1, 2} {
			procs := workers
			if procs <= 0 {
				procs = remoteProcs * engines
			}
			engineProcs := 0
			if share && engines > 1 {
				engineProcs = max(1, runtime.NumCPU()/engines)
			}
			res, err := multiOnce(ctx, admin, engineBin, engines, engineProcs, runs, conc, max(1, procs/engines))
			if err != nil {
				return fmt.Errorf("%d engine(s), round %d: %w", engines, r+1, err)
			}
			log.Printf("multi: %d engine(s), %d worker processes, round %d: %d runs in %.2fs = %.0f runs/s, %.0f steps/s; %s",
				engines, res.WorkerProcs, r+1, res.Runs, res.Elapsed.Seconds(), float64(res.Runs)/res.Elapsed.Seconds(),
				float64(res.Runs*10)/res.Elapsed.Seconds(), res.Checked)
			log.Printf("multi: %d engine(s), round %d, cost:\n%s", engines, r+1, res.Cost.lines(res.Runs*10))
			results = append(results, res)
		}
	}
	var md strings.Builder
	fmt.Fprintf(&md, "\n### Several engines on one Postgres (`make bench-scale`)\n\n")
	fmt.Fprintf(&md, "%d ten-step runs per measurement, %d in flight in total; each engine an `engine serve` process with its worker processes (the column) over HTTP/msgpack, the slots split evenly over them; callers enqueue over HTTP, spread over the engines; the shapes alternate, %d rounds. GOMAXPROCS is each engine's (`default`: every one of the machine's %d cores); with several engines sharing a host, each runs at its share of the cores, as on hosts of its own (`-share`).\n\n", runs, conc, rounds, runtime.NumCPU())
	fmt.Fprintf(&md, "| engines | GOMAXPROCS | worker processes | round | seconds | runs/s | steps/s | ÷ one engine (same round) | commits/step | Postgres µs/step | engines µs/step | workers µs/step | checks |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, res := range results {
		rate := float64(res.Runs) / res.Elapsed.Seconds()
		ratio := "1.00×"
		if res.Engines == 2 {
			one := results[i-1]
			ratio = fmt.Sprintf("%.2f×", rate/(float64(one.Runs)/one.Elapsed.Seconds()))
		}
		steps := float64(res.Runs * 10)
		procs := "default"
		if res.EngineProcs > 0 {
			procs = strconv.Itoa(res.EngineProcs)
		}
		fmt.Fprintf(&md, "| %d | %s | %d | %d | %.2f | %.0f | %.0f | %s | %.3f | %.0f | %.0f | %.0f | %s |\n", res.Engines, procs, res.WorkerProcs, i/2+1, res.Elapsed.Seconds(), rate, rate*10, ratio,
			float64(res.Cost.Commits)/steps, 1e6*res.Cost.PgCPU/steps, 1e6*res.Cost.EngineCPU/steps, 1e6*res.Cost.WorkerCPU/steps, res.Checked)
	}
	fmt.Print(md.String())
	if out != "" {
		return os.WriteFile(out, []byte(md.String()), 0o644)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitPort(addr string, procDone <-chan struct{}) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-procDone:
			return fmt.Errorf("the engine at %s exited", addr)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s after 60 s", addr)
}

// proc is a child process this scenario started; stop ends it by its own pid.
type proc struct {
	cmd  *exec.Cmd
	in   io.WriteCloser // workers stop when stdin closes
	done chan struct{}
}

func (p *proc) stop(sig os.Signal) {
	if p.in != nil {
		_ = p.in.Close()
	} else if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(sig)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func start(cmd *exec.Cmd, withStdin bool) (*proc, error) {
	p := &proc{cmd: cmd, done: make(chan struct{})}
	if withStdin {
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		p.in = in
	}
	return p, nil
}

func multiOnce(ctx context.Context, admin, engineBin string, engines, engineProcs, runs, conc, perEngine int) (MultiResult, error) {
	res := MultiResult{Engines: engines, EngineProcs: engineProcs, WorkerProcs: engines * perEngine, Runs: runs}
	db := fmt.Sprintf("bench_multi_%d", engines)
	aconn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return res, err
	}
	defer aconn.Close(ctx)
	id := pgx.Identifier{db}.Sanitize()
	_, _ = aconn.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)")
	if _, err := aconn.Exec(ctx, "CREATE DATABASE "+id); err != nil {
		return res, err
	}
	defer func() { _, _ = aconn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)") }()
	u, err := url.Parse(admin)
	if err != nil {
		return res, err
	}
	u.Path = "/" + db
	dbURL := u.String()

	var procs []*proc
	defer func() {
		// Workers first (they drain into their engine), then the engines; each by its own pid.
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop(syscall.SIGTERM)
		}
	}()
	self, err := os.Executable()
	if err != nil {
		return res, err
	}
	var clients []*api.Client
	var addrs []string
	per := max(1, conc/(engines*perEngine))
	// Engines start one after the other, so the first migrates the schema alone.
	for e := 0; e < engines; e++ {
		port, err := freePort()
		if err != nil {
			return res, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		cmd := exec.Command(engineBin, "serve", "--database-url", dbURL, "--addr", addr, "--allow-undeclared",
			"--no-scheduler", "--log-runs=false", "--log-level", "error")
		cmd.Stderr = os.Stderr
		if engineProcs > 0 {
			cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(engineProcs))
		}
		p, err := start(cmd, false)
		if err != nil {
			return res, err
		}
		if err := cmd.Start(); err != nil {
			return res, err
		}
		go func() { _ = cmd.Wait(); close(p.done) }()
		procs = append(procs, p)
		if err := waitPort(addr, p.done); err != nil {
			return res, err
		}
		c, err := api.NewClient("http://"+addr, "")
		if err != nil {
			return res, err
		}
		defer c.Close()
		clients = append(clients, c)
		addrs = append(addrs, addr)
	}
	for e := 0; e < engines; e++ {
		for w := 0; w < perEngine; w++ {
			cmd := exec.Command(self, RemoteWorkerArg, "http://"+addrs[e], strconv.Itoa(per))
			cmd.Stderr = os.Stderr
			p, err := start(cmd, true)
			if err != nil {
				return res, err
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				return res, err
			}
			if err := cmd.Start(); err != nil {
				return res, err
			}
			go func() { _ = cmd.Wait(); close(p.done) }()
			procs = append(procs, p)
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil || line != "ready\n" {
				return res, fmt.Errorf("worker process: %q, %v", line, err)
			}
		}
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	_, _ = pool.Exec(ctx, "CHECKPOINT")
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.cmd.Process.Pid
	}
	probe := newMultiProbe(ctx, aconn, db, pids, engines)
	if err := probe.begin(ctx, admin); err != nil {
		return res, err
	}

	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for p := 0; p < conc; p++ {
		wg.Go(func() {
			for i := p; i < runs; i += conc {
				r, err := remoteTenStep.Enqueue(ctx, clients[i%engines], i)
				if err == nil && r.Deduped {
					err = fmt.Errorf("run %d deduped", i)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	for {
		var done int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM jobs.runs WHERE state = 'completed'`).Scan(&done); err != nil {
			return res, err
		}
		probe.polls++
		if done >= runs {
			break
		}
		if time.Since(t0) > 10*time.Minute {
			return res, fmt.Errorf("%d of %d runs completed after 10 minutes", done, runs)
		}
		// Every 20 ms (0.2–0.4% of a measurement): at 5 ms this count of the runs' table was 30–47 µs
		// of Postgres CPU per step, in both shapes, and more in the slower one.
		time.Sleep(20 * time.Millisecond)
	}
	res.Elapsed = time.Since(t0)
	if res.Cost, err = probe.end(ctx); err != nil {
		return res, err
	}

	// Exactly once, contiguous, no errors.
	var total, completed, badHist, attempts, failed int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'completed'),
	count(*) FILTER (WHERE attempt <> 1) FROM jobs.runs`).Scan(&total, &completed, &attempts); err != nil {
		return res, err
	}
	// Each history as the engine reads it (the store rebuilds the events a run's row implies),
	// not as rows: contiguous from 1, RunStarted first, ten distinct steps, RunCompleted last.
	if badHist, err = checkHistories(ctx, dbURL, pool); err != nil {
		return res, err
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM jobs.history WHERE kind = 'AttemptFailed'`).Scan(&failed); err != nil {
		return res, err
	}
	res.Failed, res.Attempts = failed, attempts
	if total != runs || completed != runs || badHist != 0 || failed != 0 || attempts != 0 {
		return res, fmt.Errorf("checks failed: %d runs (want %d), %d completed, %d histories not contiguous or not completed exactly once with 10 steps, %d AttemptFailed, %d runs past attempt 1",
			total, runs, completed, badHist, failed, attempts)
	}
	res.Checked = fmt.Sprintf("%d/%d completed once, histories contiguous, 0 failed attempts", completed, runs)
	return res, nil
}

// checkHistories reads every run's history through the Postgres store and counts those that are
// not a ten-step run's, completed exactly once: seq contiguous from 1, RunStarted first, ten
// steps of ten names, RunCompleted last and only there.
func checkHistories(ctx context.Context, dbURL string, pool *pgxpool.Pool) (int, error) {
	st, err := postgres.Open(ctx, postgres.Config{URL: dbURL, Schema: "jobs", MaxConns: 2})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	rows, err := pool.Query(ctx, `SELECT id FROM jobs.runs`)
	if err != nil {
		return 0, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	bad := 0
	for _, id := range ids {
		evs, err := st.HistoryRead(ctx, id, 0, 0)
		if err != nil {
			return 0, err
		}
		steps, stepEvents, done := map[string]bool{}, 0, 0
		ok := len(evs) > 0 && evs[0].Kind == history.KindRunStarted && evs[len(evs)-1].Kind == history.KindRunCompleted
		for i, e := range evs {
			ok = ok && e.Seq == int64(i+1)
			switch e.Kind {
			case history.KindStepCompleted:
				steps[e.Name] = true
				stepEvents++
			case history.KindRunCompleted:
				done++
			}
		}
		if !ok || done != 1 || len(steps) != 10 || stepEvents != 10 {
			bad++
		}
	}
	return bad, nil
}
