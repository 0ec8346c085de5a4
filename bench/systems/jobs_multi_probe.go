package systems

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs/bench/internal/measure"
)

// What one shape of `bench multi` cost, per step, so that the two shapes can be compared by the
// work they did rather than by their rates alone: commits and Postgres CPU per step, the CPU of
// the engine and worker processes, the statements by calls and rows (pg_stat_statements: an
// empty claim is a call that returned no row), and what the database's backends were waiting
// on, sampled.

// MultiCost is what a shape spent over its timed window.
type MultiCost struct {
	Commits    int64   // xact_commit of the database, the bench's own completion polls taken out
	PgCPU      float64 // seconds of Postgres server CPU (every process of the cluster)
	EngineCPU  float64 // seconds, all engine processes
	WorkerCPU  float64 // seconds, all worker processes
	BenchCPU   float64 // seconds, this process (the callers and the completion poll)
	Statements []multiStmt
	Waits      map[string]int // backend states sampled every 10 ms: wait_event_type:wait_event, or "CPU"
	Samples    int
}

type multiStmt struct {
	Query       string
	Calls, Rows int64
	ExecMS      float64
	EmptyCalls  int64 // claims only: calls that returned nothing (estimated as calls minus rows when rows < calls)
}

// multiProbe reads the counters at the start and the end of a timed window.
type multiProbe struct {
	admin      *pgx.Conn // to the admin database: its own readings are not the bench database's
	db         string
	postmaster int
	pids       []int // engines first, then workers
	engines    int

	stats0       measure.DBStats
	pg0          uint64
	procs0       []uint64
	self0        time.Duration
	polls        int64 // the completion polls this process made (each one commit)
	stopSampling func() (map[string]int, int)
}

func newMultiProbe(ctx context.Context, admin *pgx.Conn, db string, pids []int, engines int) *multiProbe {
	p := &multiProbe{admin: admin, db: db, pids: pids, engines: engines}
	var dir string
	if err := admin.QueryRow(ctx, "SHOW data_directory").Scan(&dir); err == nil {
		p.postmaster, _ = measure.PostmasterPID(dir)
	}
	_, _ = admin.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
	return p
}

// begin takes the first readings. Backends flush their statistics at most once a second, so the
// database has been left alone for longer than that before.
func (p *multiProbe) begin(ctx context.Context, adminURL string) error {
	time.Sleep(1200 * time.Millisecond)
	_, _ = p.admin.Exec(ctx, "SELECT pg_stat_statements_reset()")
	var err error
	if p.stats0, err = measure.ReadDBStats(ctx, p.admin, p.db); err != nil {
		return err
	}
	if p.postmaster > 0 {
		p.pg0, _ = measure.PostgresTicks(p.postmaster)
	}
	p.procs0 = make([]uint64, len(p.pids))
	for i, pid := range p.pids {
		p.procs0[i], _ = measure.ProcTicks(pid)
	}
	p.self0 = measure.SelfCPU()
	p.stopSampling = sampleWaits(ctx, adminURL, p.db)
	return nil
}

// end takes the CPU readings at once, then the counters a second later (once every backend has
// flushed its own).
func (p *multiProbe) end(ctx context.Context) (MultiCost, error) {
	var c MultiCost
	const tick = 0.01 // USER_HZ
	if p.postmaster > 0 {
		if pg, err := measure.PostgresTicks(p.postmaster); err == nil && pg >= p.pg0 {
			c.PgCPU = float64(pg-p.pg0) * tick
		}
	}
	for i, pid := range p.pids {
		t, err := measure.ProcTicks(pid)
		if err != nil || t < p.procs0[i] {
			continue
		}
		if i < p.engines {
			c.EngineCPU += float64(t-p.procs0[i]) * tick
		} else {
			c.WorkerCPU += float64(t-p.procs0[i]) * tick
		}
	}
	c.BenchCPU = (measure.SelfCPU() - p.self0).Seconds()
	c.Waits, c.Samples = p.stopSampling()
	time.Sleep(1200 * time.Millisecond)
	s1, err := measure.ReadDBStats(ctx, p.admin, p.db)
	if err != nil {
		return c, err
	}
	c.Commits = s1.Sub(p.stats0).XactCommit - p.polls
	rows, err := p.admin.Query(ctx, `
		SELECT left(regexp_replace(s.query, '\s+', ' ', 'g'), 90), s.calls, s.rows, s.total_exec_time
		FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
		WHERE d.datname = $1 ORDER BY s.total_exec_time DESC LIMIT 14`, p.db)
	if err != nil {
		return c, nil // the extension is optional
	}
	for rows.Next() {
		var st multiStmt
		if err := rows.Scan(&st.Query, &st.Calls, &st.Rows, &st.ExecMS); err != nil {
			rows.Close()
			return c, err
		}
		c.Statements = append(c.Statements, st)
	}
	rows.Close()
	return c, rows.Err()
}

// sampleWaits counts, every 10 ms, what each active backend of db is doing; the returned func
// stops it and returns the counts.
func sampleWaits(ctx context.Context, adminURL, db string) func() (map[string]int, int) {
	counts := map[string]int{}
	samples := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return func() (map[string]int, int) { return counts, 0 }
	}
	wg.Go(func() {
		defer conn.Close(context.Background())
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			rows, err := conn.Query(ctx, `
				SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), count(*)
				FROM pg_stat_activity WHERE datname = $1 AND state = 'active' AND pid <> pg_backend_pid()
				GROUP BY 1`, db)
			if err != nil {
				return
			}
			for rows.Next() {
				var k string
				var n int
				if rows.Scan(&k, &n) == nil {
					counts[k] += n
				}
			}
			rows.Close()
			samples++
		}
	})
	return func() (map[string]int, int) {
		close(stop)
		wg.Wait()
		return counts, samples
	}
}

// lines is one shape's accounting per step, for the log.
func (c MultiCost) lines(steps int) string {
	var b strings.Builder
	ps := func(v float64) float64 { return 1e6 * v / float64(steps) } // µs per step
	fmt.Fprintf(&b, "  per step: %.3f commits, Postgres CPU %.0f µs, engines %.0f µs, workers %.0f µs, bench %.0f µs\n",
		float64(c.Commits)/float64(steps), ps(c.PgCPU), ps(c.EngineCPU), ps(c.WorkerCPU), ps(c.BenchCPU))
	for _, s := range c.Statements {
		fmt.Fprintf(&b, "  %7.3f calls/step %8.2f rows/call %6.1f µs/step  %s\n",
			float64(s.Calls)/float64(steps), float64(s.Rows)/max(1, float64(s.Calls)), 1000*s.ExecMS/float64(steps), s.Query)
	}
	if c.Samples > 0 {
		keys := make([]string, 0, len(c.Waits))
		for k := range c.Waits {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return c.Waits[keys[i]] > c.Waits[keys[j]] })
		fmt.Fprintf(&b, "  active backends per sample (%d samples):", c.Samples)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s %.2f", k, float64(c.Waits[k])/float64(c.Samples))
		}
		b.WriteString("\n")
	}
	return b.String()
}
