package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/bench/systems"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/postgres"
	"github.com/ultimat3/jobs/worker"
)

// `bench scale`: a million suspended runs. It measures a fresh workload (enqueue, then claim)
// on an empty database, loads N suspended runs (half sleeping a year, half waiting on an event
// with a 30-day timeout) in the shapes the engine writes, measures the same workload again, and
// reports the ratio, the disk bytes per suspended run, the index entries each claim read, and
// the memory a run parked in a worker's sticky cache costs.
//
// The suspended runs are copied server-side (INSERT … SELECT over generate_series) from two
// template runs that the engine and a real worker drove to their sleep and their wait: every
// row of runs, history, timers and waits is the engine's own, with the run id, the key and the
// wait's match made unique per copy.

var (
	scaleNoop = jobs.MustDefine("scale_noop", func(k string) string { return k }, jobs.NoTenant[string](),
		func(*jobs.Ctx, string) (int, error) { return 0, nil })
	scaleSleep = jobs.MustDefine("scale_sleep", func(k string) string { return k }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, k string) (int, error) {
			if _, err := jobs.Step(c, "prepare", func(context.Context) (string, error) { return k, nil }); err != nil {
				return 0, err
			}
			return 0, jobs.Sleep(c, "nap", 365*24*time.Hour)
		})
	scaleWait = jobs.MustDefine("scale_wait", func(k string) string { return k }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, k string) (int, error) {
			if _, err := jobs.Step(c, "prepare", func(context.Context) (string, error) { return k, nil }); err != nil {
				return 0, err
			}
			_, _, err := jobs.WaitForEvent[string](c, "paid", "order.paid", jobs.Match{"order": k}, 30*24*time.Hour)
			return 0, err
		})
)

// scaleTemplate is the input (and key) of the template runs; each copy replaces it.
const scaleTemplate = "tplkey00"

type scaleConfig struct {
	suspended, fresh, producers, claimers, batch, parked, rounds int
	out                                                          string
}

type phase struct {
	enqueueRate, claimRate float64
	claimP50, claimP99     time.Duration
	timerP50, timerP99     time.Duration
	publishP99             time.Duration
	fireRate               float64 // due timers fired a second, 100 a call
	fireP99                time.Duration
	idxReadPerClaim        float64
	perIndex               string
	heapReadPerClaim       float64
	enqueueTime, claimTime time.Duration
}

func scaleMain(args []string) error {
	var cfg scaleConfig
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.IntVar(&cfg.suspended, "suspended", envInt("BENCH_SCALE_SUSPENDED", 1_000_000), "suspended runs loaded (BENCH_SCALE_SUSPENDED)")
	fs.IntVar(&cfg.fresh, "fresh", envInt("BENCH_SCALE_FRESH", 10_000), "runs of the fresh workload (BENCH_SCALE_FRESH)")
	fs.IntVar(&cfg.producers, "producers", 32, "concurrent enqueuers of the fresh workload")
	fs.IntVar(&cfg.claimers, "claimers", 4, "concurrent claimers of the fresh workload")
	fs.IntVar(&cfg.batch, "batch", 16, "runs per claim")
	fs.IntVar(&cfg.parked, "parked", envInt("BENCH_SCALE_PARKED", 5_000), "runs parked in a worker's sticky cache (BENCH_SCALE_PARKED)")
	fs.IntVar(&cfg.rounds, "rounds", envInt("BENCH_SCALE_ROUNDS", 3), "alternating rounds of the fresh workload on each database (BENCH_SCALE_ROUNDS)")
	fs.StringVar(&cfg.out, "out", os.Getenv("BENCH_SCALE_OUT"), "also write the markdown report here (BENCH_SCALE_OUT)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	admin := os.Getenv("TEST_DATABASE_URL")
	if admin == "" {
		return fmt.Errorf("TEST_DATABASE_URL is not set; run it as scripts/with-postgres.sh bench/bin/bench scale")
	}
	ctx := context.Background()
	dbURL, drop, err := scratchDB(ctx, admin, "bench_scale")
	if err != nil {
		return err
	}
	defer drop()

	var md strings.Builder
	w := io.MultiWriter(os.Stdout, &md)

	// Memory per parked run: with the sticky cache and without it, so that what the engine and
	// the store keep per run (the same in both) cancels out.
	withCache, err := parkedBytes(ctx, dbURL, "park_sticky", cfg.parked, cfg.parked+1000)
	if err != nil {
		return fmt.Errorf("parked (sticky): %w", err)
	}
	without, err := parkedBytes(ctx, dbURL, "park_none", cfg.parked, -1)
	if err != nil {
		return fmt.Errorf("parked (no cache): %w", err)
	}

	// Two databases, one empty and one loaded, measured in alternation (empty, loaded, empty,
	// loaded, …): the machine is shared, and a slow minute then lands on both sides rather than
	// on one. Each figure is the median over the rounds.
	emptyURL, dropEmpty, err := scratchDB(ctx, admin, "bench_scale_empty")
	if err != nil {
		return err
	}
	defer dropEmpty()
	open := func(u string) (store.Store, *pgxpool.Pool, error) {
		st, err := postgres.Open(ctx, postgres.Config{URL: u, Schema: "jobs", MaxConns: 40, Logger: quietLog()})
		if err != nil {
			return nil, nil, err
		}
		pool, err := pgxpool.New(ctx, u)
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		return st, pool, nil
	}
	stE, poolE, err := open(emptyURL)
	if err != nil {
		return err
	}
	defer stE.Close()
	defer poolE.Close()
	st, pool, err := open(dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	defer pool.Close()

	before, err := relSizes(ctx, pool)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := loadSuspended(ctx, st, pool, cfg.suspended); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	loadTime := time.Since(t0)
	after, err := relSizes(ctx, pool)
	if err != nil {
		return err
	}
	var empties, loadeds []phase
	for r := 0; r < cfg.rounds; r++ {
		e, err := freshPhase(ctx, stE, poolE, fmt.Sprintf("e%d_", r), cfg)
		if err != nil {
			return fmt.Errorf("empty database: %w", err)
		}
		log.Printf("scale: round %d, empty database: %s", r+1, e)
		l, err := freshPhase(ctx, st, pool, fmt.Sprintf("l%d_", r), cfg)
		if err != nil {
			return fmt.Errorf("loaded database: %w", err)
		}
		log.Printf("scale: round %d, %d suspended runs: %s", r+1, cfg.suspended, l)
		empties, loadeds = append(empties, e), append(loadeds, l)
	}
	empty, loaded := medianPhase(empties), medianPhase(loadeds)
	plans, err := explainClaim(ctx, pool)
	if err != nil {
		return err
	}

	fmt.Fprintf(w, "\n### A million suspended runs (`make bench-scale`)\n\n")
	fmt.Fprintf(w, "%d suspended runs (half sleeping a year, half waiting on an event with a 30-day timeout) loaded in %.1f s (%.0f runs/s, with their history, timer and wait rows); then %d fresh no-op runs enqueued by %d callers and claimed %d at a time by %d claimers, against the same on an empty database, alternating, %d rounds (medians shown). Host: %d CPUs, shared.\n\n",
		cfg.suspended, loadTime.Seconds(), float64(cfg.suspended)/loadTime.Seconds(), cfg.fresh, cfg.producers, cfg.batch, cfg.claimers, cfg.rounds, runtime.NumCPU())
	fmt.Fprintf(w, "| figure | empty | %d suspended | ratio (loaded ÷ empty, target within 1.5×) |\n|---|---|---|---|\n", cfg.suspended)
	fmt.Fprintf(w, "| enqueue, runs/s | %.0f | %.0f | %.2f× |\n", empty.enqueueRate, loaded.enqueueRate, loaded.enqueueRate/empty.enqueueRate)
	fmt.Fprintf(w, "| claim, runs/s | %.0f | %.0f | %.2f× |\n", empty.claimRate, loaded.claimRate, loaded.claimRate/empty.claimRate)
	fmt.Fprintf(w, "| claim call p50 | %s | %s | %.2f× |\n", ms(empty.claimP50), ms(loaded.claimP50), ratio(loaded.claimP50, empty.claimP50))
	fmt.Fprintf(w, "| claim call p99 | %s | %s | %.2f× |\n", ms(empty.claimP99), ms(loaded.claimP99), ratio(loaded.claimP99, empty.claimP99))
	fmt.Fprintf(w, "| timer poll (TimerFire, nothing due) p50 | %s | %s | %.2f× |\n", ms(empty.timerP50), ms(loaded.timerP50), ratio(loaded.timerP50, empty.timerP50))
	fmt.Fprintf(w, "| index entries read per claimed run | %.1f | %.1f | |\n", empty.idxReadPerClaim, loaded.idxReadPerClaim)
	fmt.Fprintf(w, "| … by index | %s | %s | |\n", empty.perIndex, loaded.perIndex)
	fmt.Fprintf(w, "| timer poll (TimerFire, nothing due) p99 | %s | %s | %.2f× |\n", ms(empty.timerP99), ms(loaded.timerP99), ratio(loaded.timerP99, empty.timerP99))
	fmt.Fprintf(w, "| publish of an event no run waits for, p99 | %s | %s | %.2f× |\n", ms(empty.publishP99), ms(loaded.publishP99), ratio(loaded.publishP99, empty.publishP99))
	fmt.Fprintf(w, "| due timers fired (TimerFire, 100 a call), timers/s | %.0f | %.0f | %.2f× |\n", empty.fireRate, loaded.fireRate, loaded.fireRate/empty.fireRate)
	fmt.Fprintf(w, "| TimerFire call with due timers, p99 | %s | %s | %.2f× |\n\n", ms(empty.fireP99), ms(loaded.fireP99), ratio(loaded.fireP99, empty.fireP99))

	fmt.Fprintf(w, "Disk per suspended run (pg_total_relation_size deltas over the load, tables with their indexes and TOAST):\n\n| table | bytes per run |\n|---|---|\n")
	var total int64
	for _, t := range scaleTables {
		d := after[t] - before[t]
		total += d
		fmt.Fprintf(w, "| %s | %.0f |\n", t, float64(d)/float64(cfg.suspended))
	}
	fmt.Fprintf(w, "| **total** | **%.0f** |\n\n", float64(total)/float64(cfg.suspended))
	fmt.Fprintf(w, "Memory per run parked in a worker's sticky cache (%d runs parked after a step, each asleep; heap in use plus goroutine stacks after GC, runtime.MemStats; target ≤ 16 KiB): **%.1f KiB** with the cache, %.1f KiB without it (the engine's and store's share, in the same process), so the cache itself costs **%.1f KiB** a run.\n\n",
		cfg.parked, withCache/1024, without/1024, (withCache-without)/1024)
	fmt.Fprintf(w, "Plans with the suspended runs loaded (EXPLAIN ANALYZE of the fair claim's lane probe and head read, and of TimerFire's first statement, in the store's shapes, as generic plans of prepared statements):\n\n```\n%s```\n", plans)

	if cfg.out != "" {
		return os.WriteFile(cfg.out, []byte(md.String()), 0o644)
	}
	return nil
}

// medianPhase is each figure's median over the rounds (the index breakdown is the first
// round's).
func medianPhase(ps []phase) phase {
	f := func(get func(phase) float64) float64 {
		v := make([]float64, len(ps))
		for i, p := range ps {
			v[i] = get(p)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	d := func(get func(phase) time.Duration) time.Duration {
		return time.Duration(f(func(p phase) float64 { return float64(get(p)) }))
	}
	return phase{
		enqueueRate:     f(func(p phase) float64 { return p.enqueueRate }),
		claimRate:       f(func(p phase) float64 { return p.claimRate }),
		claimP50:        d(func(p phase) time.Duration { return p.claimP50 }),
		claimP99:        d(func(p phase) time.Duration { return p.claimP99 }),
		timerP50:        d(func(p phase) time.Duration { return p.timerP50 }),
		timerP99:        d(func(p phase) time.Duration { return p.timerP99 }),
		publishP99:      d(func(p phase) time.Duration { return p.publishP99 }),
		fireRate:        f(func(p phase) float64 { return p.fireRate }),
		fireP99:         d(func(p phase) time.Duration { return p.fireP99 }),
		idxReadPerClaim: f(func(p phase) float64 { return p.idxReadPerClaim }),
		perIndex:        ps[0].perIndex,
	}
}

func (p phase) String() string {
	return fmt.Sprintf("enqueue %.0f/s, claim %.0f/s, claim p50 %s p99 %s, %.1f index entries/claimed run (%s), timer poll p50 %s p99 %s, publish p99 %s, fired %.0f timers/s, fire p99 %s",
		p.enqueueRate, p.claimRate, ms(p.claimP50), ms(p.claimP99), p.idxReadPerClaim, p.perIndex, ms(p.timerP50), ms(p.timerP99), ms(p.publishP99), p.fireRate, ms(p.fireP99))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// scratchDB creates an empty database next to admin's and returns its URL and its drop.
func scratchDB(ctx context.Context, admin, name string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, err
	}
	id := pgx.Identifier{name}.Sanitize()
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)")
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+id); err != nil {
		conn.Close(ctx)
		return "", nil, err
	}
	u, err := url.Parse(admin)
	if err != nil {
		conn.Close(ctx)
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), func() {
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); err != nil {
			log.Printf("drop %s: %v", name, err)
		}
		conn.Close(context.Background())
	}, nil
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// freshPhase enqueues cfg.fresh no-op runs (keys prefix+i) through a started engine with no
// worker (so its group commit batches the callers' creates, and nothing claims them), claims
// them all with the store's claim, and times the timer poll and a publish nobody waits for; then it deletes the runs, so
// that the next phase starts from the same tables.
func freshPhase(ctx context.Context, st store.Store, pool *pgxpool.Pool, prefix string, cfg scaleConfig) (phase, error) {
	var p phase
	eng, err := engine.New(engine.Config{Store: st, AllowUndeclared: true, Logger: quietLog()})
	if err != nil {
		return p, err
	}
	if err := eng.Start(ctx); err != nil {
		return p, err
	}
	if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
		return p, err
	}
	t0 := time.Now()
	var firstID string
	var once sync.Once
	if _, err := systems.ClosedLoop(ctx, cfg.fresh, cfg.producers, func(ctx context.Context, i int) error {
		res, err := scaleNoop.Enqueue(ctx, eng, fmt.Sprintf("%s%08d", prefix, i))
		once.Do(func() { firstID = res.RunID })
		return err
	}); err != nil {
		return p, err
	}
	p.enqueueTime = time.Since(t0)
	p.enqueueRate = float64(cfg.fresh) / p.enqueueTime.Seconds()
	first, err := st.RunGet(ctx, firstID)
	if err != nil {
		return p, err
	}

	idx0, heap0, by0, err := runsReads(ctx, pool)
	if err != nil {
		return p, err
	}
	var mu sync.Mutex
	var lat []time.Duration
	claimed := 0
	var wg sync.WaitGroup
	errs := make(chan error, cfg.claimers)
	t0 = time.Now()
	for c := range cfg.claimers {
		wg.Go(func() {
			for {
				now := time.Now()
				s := time.Now()
				runs, err := st.RunClaim(ctx, store.ClaimParams{WorkerID: fmt.Sprintf("claimer-%d", c),
					Queues: []string{first.Queue}, Limit: cfg.batch, Now: now, LeaseUntil: now.Add(10 * time.Minute),
					StickyBefore: now})
				d := time.Since(s)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				lat = append(lat, d)
				claimed += len(runs)
				mu.Unlock()
				if len(runs) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	p.claimTime = time.Since(t0)
	close(errs)
	if err := <-errs; err != nil {
		return p, err
	}
	if claimed != cfg.fresh {
		return p, fmt.Errorf("claimed %d of %d", claimed, cfg.fresh)
	}
	idx1, heap1, by1, err := runsReads(ctx, pool)
	if err != nil {
		return p, err
	}
	p.claimRate = float64(claimed) / p.claimTime.Seconds()
	p.claimP50, p.claimP99 = pct(lat, 0.50), pct(lat, 0.99)
	// The stats collector flushes at transaction end; small lags only blur the figure.
	p.idxReadPerClaim = float64(idx1-idx0) / float64(claimed)
	p.heapReadPerClaim = float64(heap1-heap0) / float64(claimed)
	var parts []string
	for name, n := range by1 {
		if d := n - by0[name]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f", name, float64(d)/float64(claimed)))
		}
	}
	slices.Sort(parts)
	p.perIndex = strings.Join(parts, ", ")

	lat = lat[:0]
	for range 200 {
		s := time.Now()
		if _, err := st.TimerFire(ctx, time.Now(), 100); err != nil {
			return p, err
		}
		lat = append(lat, time.Since(s))
	}
	p.timerP50, p.timerP99 = pct(lat, 0.50), pct(lat, 0.99)
	lat = lat[:0]
	payload, _ := jobs.Encode(map[string]string{"order": "nobody"})
	for range 200 {
		s := time.Now()
		if _, err := eng.PublishEvent(ctx, "order.paid", payload); err != nil {
			return p, err
		}
		lat = append(lat, time.Since(s))
	}
	p.publishP99 = pct(lat, 0.99)

	// Due timers among the suspended runs' far ones: delayed runs written by an engine that is
	// not started (so nothing fires them but the calls timed here), fired 100 a call.
	if err := eng.Stop(ctx); err != nil {
		return p, err
	}
	side, err := engine.New(engine.Config{Store: st, AllowUndeclared: true, Logger: quietLog()})
	if err != nil {
		return p, err
	}
	const lead = 2 * time.Second
	due := cfg.fresh / 4
	reqs := make([]jobs.EnqueueRequest, due)
	for i := range reqs {
		if reqs[i], err = scaleNoop.Request(fmt.Sprintf("%sd%08d", prefix, i)); err != nil {
			return p, err
		}
		reqs[i].Delay = lead
	}
	if _, err := side.EnqueueMany(ctx, reqs); err != nil {
		return p, err
	}
	time.Sleep(lead + 100*time.Millisecond)
	lat = lat[:0]
	fired := 0
	t0 = time.Now()
	for fired < due {
		s := time.Now()
		woken, err := st.TimerFire(ctx, time.Now(), 100)
		if err != nil {
			return p, err
		}
		lat = append(lat, time.Since(s))
		if len(woken) == 0 {
			return p, fmt.Errorf("TimerFire fired %d of %d due timers, then none", fired, due)
		}
		fired += len(woken)
	}
	p.fireRate = float64(fired) / time.Since(t0).Seconds()
	p.fireP99 = pct(lat, 0.99)

	if _, err := pool.Exec(ctx, `DELETE FROM jobs.history WHERE run_id IN (SELECT id FROM jobs.runs WHERE job = 'scale_noop');
DELETE FROM jobs.timers WHERE run_id IN (SELECT id FROM jobs.runs WHERE job = 'scale_noop');
DELETE FROM jobs.runs WHERE job = 'scale_noop'; DELETE FROM jobs.events`); err != nil {
		return p, err
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE jobs.runs"); err != nil {
		return p, err
	}
	return p, nil
}

// runsReads is the runs table's index entries and heap rows read so far, and the entries read
// per index.
func runsReads(ctx context.Context, pool *pgxpool.Pool) (idx, heap int64, by map[string]int64, err error) {
	// An idle backend flushes its counters within a second.
	time.Sleep(1500 * time.Millisecond)
	rows, err := pool.Query(ctx, `SELECT indexrelname, idx_tup_read, idx_tup_fetch
FROM pg_stat_user_indexes WHERE schemaname = 'jobs' AND relname = 'runs'`)
	if err != nil {
		return 0, 0, nil, err
	}
	defer rows.Close()
	by = map[string]int64{}
	for rows.Next() {
		var name string
		var r, f int64
		if err := rows.Scan(&name, &r, &f); err != nil {
			return 0, 0, nil, err
		}
		by[name] = r
		idx, heap = idx+r, heap+f
	}
	return idx, heap, by, rows.Err()
}

func pct(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*q))]
}

var scaleTables = []string{"runs", "history", "timers", "waits"}

func relSizes(ctx context.Context, pool *pgxpool.Pool) (map[string]int64, error) {
	if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, t := range scaleTables {
		var n int64
		if err := pool.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass)`, "jobs."+t).Scan(&n); err != nil {
			return nil, err
		}
		out[t] = n
	}
	return out, nil
}

// loadSuspended drives one sleeping and one waiting template run to their suspension with a
// real worker, then copies each n/2 times, server-side, in chunks.
func loadSuspended(ctx context.Context, st store.Store, pool *pgxpool.Pool, n int) error {
	eng, err := engine.New(engine.Config{Store: st, AllowUndeclared: true, Logger: quietLog()})
	if err != nil {
		return err
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	reg, err := jobs.NewRegistry(scaleSleep, scaleWait)
	if err != nil {
		return err
	}
	// No sticky cache: the worker forgets the templates when they suspend, as a worker that
	// restarted would have, and the copies hold no worker.
	wk, err := worker.New(worker.Config{Frontend: eng, Registry: reg, Concurrency: 2, StickyRuns: -1, Logger: quietLog()})
	if err != nil {
		return err
	}
	if err := wk.Start(ctx); err != nil {
		return err
	}
	var tpl []string
	for _, def := range []*jobs.Job[string, int]{scaleSleep, scaleWait} {
		res, err := def.Enqueue(ctx, eng, scaleTemplate)
		if err != nil {
			return err
		}
		tpl = append(tpl, res.RunID)
	}
	for _, id := range tpl {
		for {
			r, err := st.RunGet(ctx, id)
			if err != nil {
				return err
			}
			if r.State == store.StateSuspended && r.WorkerID == "" {
				break
			}
			if time.Since(r.CreatedAt) > time.Minute {
				return fmt.Errorf("template %s still %s after a minute", id, r.State)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = wk.Stop(sctx)
	_ = eng.Stop(sctx)

	const chunk = 100_000
	for k, id := range tpl {
		half := n / 2
		if k == 1 {
			half = n - n/2
		}
		for from := 0; from < half; from += chunk {
			to := min(half, from+chunk)
			if err := copyRun(ctx, pool, id, fmt.Sprintf("%c", 'a'+k), from, to); err != nil {
				return err
			}
			log.Printf("scale: template %d: %d of %d copies", k, to, half)
		}
	}
	_, err = pool.Exec(ctx, "VACUUM ANALYZE jobs.runs, jobs.history, jobs.timers, jobs.waits")
	return err
}

// copyRun copies template run id as copies [from, to): in every row of its runs, history,
// timers and waits, the id becomes a new id of the same length, and the template's key (which
// is also its wait's match value) becomes a key of the copy's own.
func copyRun(ctx context.Context, pool *pgxpool.Pool, id, tag string, from, to int) error {
	newID := fmt.Sprintf(`left($1, %d) || %s || lpad(g::text, 11, '0')`, len(id)-12, quoteLit(tag))
	newKey := fmt.Sprintf(`replace(%%s, %s, %s || lpad(g::text, 7, '0'))`, quoteLit(scaleTemplate), quoteLit(tag))
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	for _, t := range scaleTables {
		rows, err := tx.Query(ctx, `SELECT column_name, data_type FROM information_schema.columns
WHERE table_schema = 'jobs' AND table_name = $1 AND is_generated = 'NEVER' ORDER BY ordinal_position`, t)
		if err != nil {
			return err
		}
		var cols, sel []string
		for rows.Next() {
			var c, typ string
			if err := rows.Scan(&c, &typ); err != nil {
				return err
			}
			expr := pgx.Identifier{c}.Sanitize()
			switch {
			case (t == "runs" && c == "id") || (t != "runs" && c == "run_id"):
				expr = newID
			case (t == "runs" && c == "key") || (t == "waits" && c == "match_head"):
				expr = fmt.Sprintf(newKey, expr)
			case t == "waits" && c == "match":
				expr = fmt.Sprintf(newKey, expr+"::text") + "::text[]"
			}
			cols, sel = append(cols, pgx.Identifier{c}.Sanitize()), append(sel, expr)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		idCol := "run_id"
		if t == "runs" {
			idCol = "id"
		}
		q := fmt.Sprintf(`INSERT INTO jobs.%s (%s) SELECT %s FROM jobs.%s, generate_series($2::int, $3::int - 1) g WHERE %s = $1`,
			t, strings.Join(cols, ", "), strings.Join(sel, ", "), t, idCol)
		if _, err := tx.Exec(ctx, q, id, from, to); err != nil {
			return fmt.Errorf("copy into %s: %w", t, err)
		}
	}
	return tx.Commit(ctx)
}

func quoteLit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// explainClaim shows the plans, with the suspended runs loaded, of the statements that could
// scan them, in the shapes the Postgres store sends: the fair claim's lane probe (one a tenant)
// and its read of a lane's heads, and the first statement of TimerFire. (The store's rendered
// statements are internal to it; these are their WHERE and ORDER BY, which decide the plan.)
func explainClaim(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Release()
	// The store's statements are prepared, with parameters: after five executions Postgres may
	// keep a generic plan, made without the parameters' values. Show that plan, which is the
	// one a long-running engine ends up with.
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		return "", err
	}
	defer conn.Exec(ctx, "RESET plan_cache_mode")
	var b strings.Builder
	for _, q := range []struct {
		sql, args string
	}{
		{`SELECT r.tenant FROM jobs.runs r WHERE r.state = 'ready' AND r.queue = $1 ORDER BY r.tenant, jobs.claim_at(r.ready_at, r.priority) LIMIT 1`,
			`('default')`},
		{`SELECT r.id FROM jobs.runs r WHERE r.state = 'ready' AND r.queue = $1 AND r.tenant = $2 AND (r.worker_id = '' OR r.worker_id = $3 OR r.ready_at <= $4) ORDER BY jobs.claim_at(r.ready_at, r.priority), r.id LIMIT $5 FOR UPDATE SKIP LOCKED`,
			`('default', '', 'w', now(), 16)`},
		// TimerFire's first statement as the store sends it (stmtTimersDueRuns), its columns cut to
		// the id: each due timer's run locked through runs_pkey, one id at a time.
		{`SELECT r.id FROM (SELECT DISTINCT run_id FROM (SELECT run_id FROM jobs.timers WHERE due_at <= $1 ORDER BY due_at LIMIT $2) d ORDER BY run_id) t CROSS JOIN LATERAL (SELECT * FROM jobs.runs WHERE id = t.run_id FOR UPDATE SKIP LOCKED) r ORDER BY t.run_id`,
			`(now(), 100)`},
	} {
		if _, err := conn.Exec(ctx, "PREPARE scale_q AS "+q.sql); err != nil {
			return "", err
		}
		rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) EXECUTE scale_q "+q.args)
		if err != nil {
			return "", err
		}
		b.WriteString(q.sql + "\n")
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return "", err
			}
			b.WriteString("  " + line + "\n")
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return "", err
		}
		if _, err := conn.Exec(ctx, "DEALLOCATE scale_q"); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// parkedBytes parks n runs (a step, then a year's sleep) on an in-process worker whose sticky
// cache holds `sticky` runs (-1: none) and returns the heap in use plus goroutine stacks they
// added, per run, after GC.
func parkedBytes(ctx context.Context, dbURL, schema string, n, sticky int) (float64, error) {
	st, err := postgres.Open(ctx, postgres.Config{URL: dbURL, Schema: schema, MaxConns: 16, Logger: quietLog()})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	eng, err := engine.New(engine.Config{Store: st, AllowUndeclared: true, Logger: quietLog()})
	if err != nil {
		return 0, err
	}
	if err := eng.Start(ctx); err != nil {
		return 0, err
	}
	defer eng.Stop(context.Background())
	reg, err := jobs.NewRegistry(scaleSleep)
	if err != nil {
		return 0, err
	}
	wk, err := worker.New(worker.Config{Frontend: eng, Registry: reg, Concurrency: 32, StickyRuns: sticky, Logger: quietLog()})
	if err != nil {
		return 0, err
	}
	if err := wk.Start(ctx); err != nil {
		return 0, err
	}
	defer wk.Stop(context.Background())
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	// Warm up: one run through the same path, so that lazily built state is not counted.
	if _, err := scaleSleep.Enqueue(ctx, eng, "warm"); err != nil {
		return 0, err
	}
	if err := waitSuspended(ctx, pool, schema, 1); err != nil {
		return 0, err
	}
	m0 := inUse()
	if _, err := systems.ClosedLoop(ctx, n, 16, func(ctx context.Context, i int) error {
		_, err := scaleSleep.Enqueue(ctx, eng, fmt.Sprintf("p%07d", i))
		return err
	}); err != nil {
		return 0, err
	}
	if err := waitSuspended(ctx, pool, schema, n+1); err != nil {
		return 0, err
	}
	time.Sleep(500 * time.Millisecond) // let the last acknowledgements land
	m1 := inUse()
	per := float64(int64(m1)-int64(m0)) / float64(n)
	log.Printf("scale: %d runs parked, sticky %d: %.0f B a run", n, sticky, per)
	return per, nil
}

func waitSuspended(ctx context.Context, pool *pgxpool.Pool, schema string, n int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var k int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "runs"}.Sanitize()+` WHERE state = 'suspended'`).Scan(&k); err != nil {
			return err
		}
		if k >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d runs suspended", k, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func inUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse
}
