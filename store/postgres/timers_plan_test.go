package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TimerFire's first statement reads the runs of the due timers by primary key even as a generic
// plan, which knows neither the due time nor the limit: with suspended runs by the thousand
// (a million in production), a plan that scans runs would read all of them on every fire.
func TestTimersDueRunsGenericPlanReadsRunsByKey(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{})
	ctx := context.Background()
	// Suspended runs, each with a timer far in the future, and statistics that know of them.
	if _, err := s.pool.Exec(ctx, s.render(`
INSERT INTO {S}.runs (id, job, queue, key, state, created_at, updated_at)
SELECT 'r' || lpad(g::text, 8, '0'), 'j', 'q', 'k' || g, 'suspended', now(), now() FROM generate_series(1, 20000) g;
INSERT INTO {S}.timers (run_id, key, due_at)
SELECT 'r' || lpad(g::text, 8, '0'), 'nap', now() + interval '1 year' FROM generate_series(1, 20000) g;
ANALYZE {S}.runs, {S}.timers`)); err != nil {
		t.Fatal(err)
	}
	conn := genericPlanConn(t, s)
	if _, err := conn.Exec(ctx, "PREPARE due_runs AS "+s.q(stmtTimersDueRuns)); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), "DEALLOCATE due_runs")
	text, err := planText(ctx, conn, "EXPLAIN (COSTS OFF) EXECUTE due_runs (now(), 100)")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, "Seq Scan on runs") || !strings.Contains(text, "runs_pkey") {
		t.Fatalf("the generic plan of TimerFire's first statement does not read runs by key:\n%s", text)
	}
}

// The plan a connection caches for TimerFire's first statement is made on its first fires, and a
// fresh database's first fires come while runs is nearly empty and has no statistics: the plan
// must read runs by key even then. The generic plan is kept until an ANALYZE of runs replaces
// it, and a sequential scan planned for an empty table reads every suspended run on every round
// once the table has filled (10,000 sleepers made each round of the timer-lag bench 0.2–0.4 s
// until autovacuum's first ANALYZE). The multi-run lock of a record and of a publish is the same
// case (a record of 16 runs read all 10,000).
func TestRunLookupsPlannedOnEmptyTablesReadRunsByKey(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{})
	ctx := context.Background()
	conn := genericPlanConn(t, s)
	for _, c := range []struct {
		name, stmt, args string
	}{
		{"timers_due_runs", s.q(stmtTimersDueRuns), "(now(), 512)"},
		{"runs_lock", s.q(stmtRunsLock), "(ARRAY['a','b'])"},
	} {
		if _, err := conn.Exec(ctx, "PREPARE "+c.name+"_empty AS "+c.stmt); err != nil {
			t.Fatal(err)
		}
		defer conn.Exec(context.Background(), "DEALLOCATE "+c.name+"_empty")
		text, err := planText(ctx, conn, "EXPLAIN (COSTS OFF) EXECUTE "+c.name+"_empty "+c.args)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(text, "Seq Scan on runs") || !strings.Contains(text, "runs_pkey") {
			t.Errorf("%s, planned on empty tables, does not read runs by key:\n%s", c.name, text)
		}
	}
}

// genericPlanConn is a connection of s's pool that plans every prepared statement generically,
// as a connection does once it has cached a statement's plan; the test's end puts it back.
func genericPlanConn(t *testing.T, s *Store) *pgxpool.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "RESET plan_cache_mode") })
	return conn
}

// The store analyzes a table that outgrew its statistics, without waiting for autovacuum's
// next visit (analyze.go): the plans connections cached while the tables were empty are made
// again from tables of their real size. Autovacuum is off for these tables, so only the store
// can be what analyzes them; a table that holds fewer than analyzeAfter rows is left alone.
func TestNewSchemaIsAnalyzedAsItFills(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{})
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, s.render(`
ALTER TABLE {S}.runs SET (autovacuum_enabled = false);
ALTER TABLE {S}.timers SET (autovacuum_enabled = false);
INSERT INTO {S}.runs (id, job, queue, key, state, created_at, updated_at)
SELECT 'r' || lpad(g::text, 8, '0'), 'j', 'q', 'k' || g, 'suspended', now(), now() FROM generate_series(1, 3000) g;
INSERT INTO {S}.timers (run_id, key, due_at)
SELECT 'r' || lpad(g::text, 8, '0'), 'nap', now() + interval '1 year' FROM generate_series(1, 10) g`)); err != nil {
		t.Fatal(err)
	}
	var runsAnalyzed, timersAnalyzed bool
	var tuples float64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if err := s.pool.QueryRow(ctx, `
SELECT r.last_analyze IS NOT NULL, t.last_analyze IS NOT NULL, c.reltuples
FROM pg_stat_user_tables r, pg_stat_user_tables t, pg_class c
WHERE r.schemaname = $1 AND r.relname = 'runs' AND t.schemaname = $1 AND t.relname = 'timers'
	AND c.oid = r.relid`, s.schema).Scan(&runsAnalyzed, &timersAnalyzed, &tuples); err != nil {
			t.Fatal(err)
		}
		if runsAnalyzed || time.Now().After(deadline) {
			break
		}
	}
	if !runsAnalyzed || tuples < 3000 {
		t.Fatalf("runs after 3,000 inserts: analyzed %v, %v rows in its statistics; want analyzed with 3,000", runsAnalyzed, tuples)
	}
	if timersAnalyzed {
		t.Errorf("timers was analyzed holding 10 rows; want it left to autovacuum below %d rows", analyzeAfter)
	}
}
