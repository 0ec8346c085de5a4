package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/pgcluster"
	"github.com/ultimat3/jobs/store"
)

// Config is one chaos run.
type Config struct {
	// Store is "sqlite" or "postgres". Postgres runs on a throwaway cluster the harness starts
	// (and crashes once, mid-run).
	Store string
	// Runs of Steps steps each, every step lingering Linger after its side effect.
	Runs, Steps int
	Linger      time.Duration
	// Workers processes of Concurrency runs each.
	Workers, Concurrency int
	// Chaos is how long the kill loop runs; a kill (worker or engine) every KillEvery on average.
	Chaos, KillEvery time.Duration
	// Settle bounds the wait for every run to complete after the kill loop.
	Settle time.Duration
	Seed   int64
	// Log receives the children's stderr and the harness's progress. Defaults to io.Discard.
	Log io.Writer
}

// Report is what a chaos run observed.
type Report struct {
	Config                                Config
	Elapsed                               time.Duration
	Completed, NotCompleted               int
	StepsRecorded, Effects, Duplicates    int
	DuplicateBound                        int
	UnbackedSteps, DoubleRecorded         int
	HistoryGaps                           int
	LeftRunning                           int
	AttemptsSpent                         int
	WorkerKills, EngineKills, StoreCrashs int
	Reclaims                              []time.Duration
	// Heartbeats and SessionRequests are the workers' liveness requests that reached the engine,
	// over WorkerTime, the sum of the worker processes' lifetimes (traffic.go).
	// SessionsCut are the sessions an engine kill ended: the reconnects after them are the
	// disruption's cost, not the session's steady-state traffic.
	Heartbeats, SessionRequests, SessionsCut int
	WorkerTime                               time.Duration
}

// Run runs the harness in a fresh temp directory under dir.
func Run(ctx context.Context, dir string, cfg Config) (Report, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	rep := Report{Config: cfg}
	began := time.Now()
	rng := rand.New(rand.NewSource(cfg.Seed))
	logf := func(format string, args ...any) {
		fmt.Fprintf(cfg.Log, "chaos: "+format+"\n", args...)
	}

	engineBin, workerBin, err := build(dir)
	if err != nil {
		return rep, err
	}
	effectsPath := filepath.Join(dir, "effects.db")
	trafficPath := filepath.Join(dir, "traffic")
	fx, err := OpenEffects(effectsPath)
	if err != nil {
		return rep, err
	}
	defer fx.Close()

	var pg *pgcluster.Cluster
	dbArgs := []string{"--database-url", "", "--data-dir", filepath.Join(dir, "data")}
	if cfg.Store == "postgres" {
		if pg, err = pgcluster.Start(ctx, cfg.Log); err != nil {
			return rep, err
		}
		defer pg.Remove()
		dbArgs = []string{"--database-url", pg.URL(), "--database-schema", "chaos"}
	}

	port, err := pgcluster.FreePort()
	if err != nil {
		return rep, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	server := "http://" + addr
	client, err := api.NewClient(server, "", api.WithTimeout(10*time.Second))
	if err != nil {
		return rep, err
	}
	defer client.Close()

	var eng *proc
	startEngine := func() error {
		args := append([]string{"serve", "--addr", addr, "--log-level", "warn"}, dbArgs...)
		if eng, err = start(cfg.Log, engineBin, args...); err != nil {
			return err
		}
		deadline := time.Now().Add(60 * time.Second)
		for client.Ready(ctx) != nil {
			if time.Now().After(deadline) {
				return fmt.Errorf("the engine did not become ready")
			}
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	}
	if err := startEngine(); err != nil {
		return rep, err
	}
	defer func() { eng.term(10 * time.Second) }()

	workers := make([]*proc, cfg.Workers)
	ids := make([]string, cfg.Workers)
	born := make([]time.Time, cfg.Workers) // when each worker process started, for WorkerTime
	gen := 0
	startWorker := func(i int) error {
		gen++
		ids[i] = fmt.Sprintf("chaos-w%d-%d", i, gen)
		p, err := start(cfg.Log, workerBin, "--server", server, "--id", ids[i], "--effects", effectsPath,
			"--concurrency", fmt.Sprint(cfg.Concurrency), "--traffic", trafficPath)
		workers[i], born[i] = p, time.Now()
		return err
	}
	for i := range workers {
		if err := startWorker(i); err != nil {
			return rep, err
		}
	}
	defer func() {
		for _, w := range workers {
			if w != nil {
				w.term(10 * time.Second)
			}
		}
	}()

	// Runs arrive as a stream over most of the chaos window, so every kill finds steps in
	// flight. An enqueue the engine did not answer (it was being killed) is sent again: the
	// idempotency key makes the resend safe.
	runIDs := make([]string, 0, cfg.Runs)
	enqueued := make(chan error, 1)
	go func() {
		every := cfg.Chaos * 8 / 10 / time.Duration(max(cfg.Runs, 1))
		for n := 0; n < cfg.Runs; n++ {
			in, err := jobs.Encode(Input{N: n, Steps: cfg.Steps, Linger: int(cfg.Linger / time.Millisecond)})
			if err != nil {
				enqueued <- err
				return
			}
			req := jobs.EnqueueRequest{Job: JobName, Key: fmt.Sprint(n), NoTenant: true, Input: in}
			for {
				res, err := client.Enqueue(ctx, req)
				if err == nil {
					runIDs = append(runIDs, res.RunID)
					break
				}
				if ctx.Err() != nil {
					enqueued <- err
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(every)
		}
		enqueued <- nil
	}()
	logf("%d runs arriving on %s; chaos for %s", cfg.Runs, cfg.Store, cfg.Chaos)

	// The kill loop: one disruption at a time, each measured before the next.
	chaosEnd := time.Now().Add(cfg.Chaos)
	crashStoreAt := time.Now().Add(cfg.Chaos / 2)
	for time.Now().Before(chaosEnd) && ctx.Err() == nil {
		pause := time.Duration(rng.Int63n(int64(cfg.KillEvery))) + cfg.KillEvery/2
		time.Sleep(pause)
		switch {
		case pg != nil && rep.StoreCrashs == 0 && time.Now().After(crashStoreAt):
			logf("crash postgres")
			if err := pg.Crash(ctx); err != nil {
				return rep, err
			}
			time.Sleep(time.Second)
			if err := pg.Start(ctx); err != nil {
				return rep, err
			}
			rep.StoreCrashs++
		case rng.Intn(3) == 0:
			logf("kill -9 engine")
			eng.kill()
			rep.EngineKills++
			time.Sleep(time.Duration(300+rng.Intn(1200)) * time.Millisecond)
			if err := startEngine(); err != nil {
				return rep, err
			}
		default:
			i := rng.Intn(cfg.Workers)
			killedAt := time.Now()
			d, err := killWorker(ctx, client, workers[i], ids[i])
			if err != nil {
				return rep, err
			}
			rep.WorkerTime += killedAt.Sub(born[i])
			rep.WorkerKills++
			if d >= 0 {
				rep.Reclaims = append(rep.Reclaims, d)
				logf("kill -9 worker %s: reclaimed in %s", ids[i], d.Round(time.Millisecond))
			}
			if err := startWorker(i); err != nil {
				return rep, err
			}
		}
	}

	if err := <-enqueued; err != nil {
		return rep, fmt.Errorf("enqueue: %w", err)
	}
	// Settle: every run must complete.
	logf("settling")
	deadline := time.Now().Add(cfg.Settle)
	pending := slices.Clone(runIDs)
	for len(pending) > 0 && time.Now().Before(deadline) {
		var still []string
		for _, id := range pending {
			v, err := client.GetRun(ctx, id)
			if err != nil || v.State != store.StateCompleted {
				still = append(still, id)
			}
		}
		pending = still
		if len(pending) > 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}

	// The invariants.
	counts, tokens, err := fx.Counts(ctx)
	if err != nil {
		return rep, err
	}
	recorded := map[[2]string]int{}
	for _, id := range runIDs {
		v, err := client.GetRun(ctx, id)
		if err != nil {
			return rep, err
		}
		switch v.State {
		case store.StateCompleted:
			rep.Completed++
		case store.StateRunning:
			rep.LeftRunning++
			rep.NotCompleted++
		default:
			rep.NotCompleted++
		}
		evs, err := client.History(ctx, id, 0)
		if err != nil {
			return rep, err
		}
		for i, ev := range evs {
			if ev.Seq != int64(i+1) {
				rep.HistoryGaps++
				break
			}
		}
		for _, ev := range evs {
			switch ev.Kind {
			case history.KindAttemptFailed:
				rep.AttemptsSpent++
			case history.KindStepCompleted:
				p, err := ev.Decode()
				if err != nil {
					return rep, err
				}
				var tok string
				if err := jobs.Decode(p.(history.StepCompleted).Output, &tok); err != nil || !tokens[tok] {
					rep.UnbackedSteps++
				}
				k := [2]string{id, ev.Name}
				recorded[k]++
				if recorded[k] > 1 {
					rep.DoubleRecorded++
				}
				rep.StepsRecorded++
			}
		}
	}
	for _, n := range counts {
		rep.Effects += n
	}
	rep.Duplicates = rep.Effects - rep.StepsRecorded
	for _, b := range born {
		rep.WorkerTime += time.Since(b) // the workers still alive
	}
	if rep.Heartbeats, rep.SessionRequests, rep.SessionsCut, err = readTally(trafficPath); err != nil {
		return rep, err
	}
	// A kill can cut short at most one step per run in flight on the killed worker.
	rep.DuplicateBound = rep.WorkerKills * cfg.Concurrency
	rep.Elapsed = time.Since(began)
	return rep, nil
}

// killWorker SIGKILLs a worker and measures how long until the runs it held are claimable
// again (-1 when it held none).
func killWorker(ctx context.Context, c *api.Client, w *proc, id string) (time.Duration, error) {
	page, err := c.ListRuns(ctx, store.ListParams{State: store.StateRunning, Limit: 500})
	if err != nil {
		return 0, err
	}
	var held []string
	for _, r := range page.Runs {
		v, err := c.GetRun(ctx, r.ID)
		if err == nil && v.State == store.StateRunning && v.WorkerID == id {
			held = append(held, r.ID)
		}
	}
	killed := time.Now()
	w.kill()
	if len(held) == 0 {
		return -1, nil
	}
	deadline := killed.Add(2 * time.Minute)
	for len(held) > 0 {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("runs %v of killed worker %s not reclaimed in 2 minutes", held, id)
		}
		var still []string
		for _, r := range held {
			v, err := c.GetRun(ctx, r)
			if err != nil || (v.State == store.StateRunning && v.WorkerID == id) {
				still = append(still, r)
			}
		}
		held = still
		if len(held) > 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return time.Since(killed), nil
}

// Check returns the invariants that failed, nil when all hold.
func (r Report) Check() error {
	var bad []string
	for _, row := range r.rows() {
		if !row.ok {
			bad = append(bad, row.name+": "+row.value)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("chaos invariants broken:\n  %s", strings.Join(bad, "\n  "))
	}
	return nil
}

// The targets: reclaim after a worker SIGKILL within 5s at the p99, at the default lease
// and heartbeat, for at most twice the liveness traffic of the heartbeats alone (the heartbeat
// interval is unchanged, so the heartbeats counted are what a lease-only design sends).
const (
	reclaimTarget   = 5 * time.Second
	maxTrafficRatio = 2.0
)

// trafficRow judges the liveness traffic. Every worker start and every engine restart costs one
// session request per worker whatever its lifetime, so a short run (the one in `make test`)
// shows mostly those: under judgeTrafficAfter of worker time it is printed, not judged.
func (r Report) trafficRow() row {
	ratio := trafficRatio(r.WorkerTime, max(r.SessionRequests-r.SessionsCut, 0))
	v := fmt.Sprintf("%.2f×: %d session requests in %s of worker time, %d of them reconnects after an engine kill (%.2f× with them; %d heartbeats sent)",
		ratio, r.SessionRequests, r.WorkerTime.Round(time.Second), r.SessionsCut, trafficRatio(r.WorkerTime, r.SessionRequests), r.Heartbeats)
	if r.WorkerTime < judgeTrafficAfter {
		return row{"liveness traffic over a renewal per worker per 10s (target ≤ 2×)", v + "; too short to judge", true}
	}
	return row{"liveness traffic over a renewal per worker per 10s (target ≤ 2×)", v, ratio <= maxTrafficRatio}
}

// judgeTrafficAfter is the worker time below which the traffic ratio is not judged.
const judgeTrafficAfter = 5 * time.Minute

type row struct {
	name, value string
	ok          bool
}

func (r Report) rows() []row {
	p50, p99, maxR := percentile(r.Reclaims, 50), percentile(r.Reclaims, 99), percentile(r.Reclaims, 100)
	return []row{
		{"every run completed", fmt.Sprintf("%d of %d", r.Completed, r.Completed+r.NotCompleted), r.NotCompleted == 0},
		{"every (run, step) recorded once", fmt.Sprintf("%d steps recorded, %d twice", r.StepsRecorded, r.DoubleRecorded), r.DoubleRecorded == 0 && r.StepsRecorded == r.Completed*r.Config.Steps},
		{"every recorded step backed by its side effect", fmt.Sprintf("%d unbacked", r.UnbackedSteps), r.UnbackedSteps == 0},
		{"side effects beyond once (kills that hit a step in flight)", fmt.Sprintf("%d of %d effects (bound %d)", r.Duplicates, r.Effects, r.DuplicateBound), r.Duplicates >= 0 && r.Duplicates <= r.DuplicateBound},
		{"history seqs contiguous", fmt.Sprintf("%d runs with a gap", r.HistoryGaps), r.HistoryGaps == 0},
		{"no run left running with a lapsed lease", fmt.Sprintf("%d left running", r.LeftRunning), r.LeftRunning == 0},
		{"attempts spent by engine restarts, worker kills and store crashes", fmt.Sprint(r.AttemptsSpent), r.AttemptsSpent == 0},
		{"reclaim after a worker SIGKILL (p50 / p99 / max; target p99 ≤ 5s)", fmt.Sprintf("%s / %s / %s over %d kills", p50, p99, maxR, len(r.Reclaims)), len(r.Reclaims) == 0 || p99 <= reclaimTarget},
		r.trafficRow(),
		{"disruptions", fmt.Sprintf("%d worker kills, %d engine kills, %d store crashes", r.WorkerKills, r.EngineKills, r.StoreCrashs), true},
	}
}

// Table renders the report as a Markdown table.
func (r Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d runs × %d steps, %d workers × %d, %s of chaos, %s in all\n\n", r.Config.Store, r.Config.Runs,
		r.Config.Steps, r.Config.Workers, r.Config.Concurrency, r.Config.Chaos, r.Elapsed.Round(time.Second))
	b.WriteString("| invariant | observed | holds |\n|---|---|---|\n")
	for _, row := range r.rows() {
		ok := "yes"
		if !row.ok {
			ok = "**NO**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", row.name, row.value, ok)
	}
	return b.String()
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	i = min(max(i, 1), len(s))
	return s[i-1].Round(time.Millisecond)
}
