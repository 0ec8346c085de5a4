package postgres

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs/store"
)

// The fair claim reads each lane's head through runs_lanes, never the backlog: on a queue where
// one tenant has 50,000 ready runs and another 100, its plan has no sequential scan and no sort
// of the backlog, and it reads a few dozen rows.
func TestFairClaimPlanOnABacklog(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a 50,000-run backlog")
	}
	t.Parallel()
	s := OpenTest(t, Config{})
	ctx := t.Context()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(n int, tenant string) store.CreateRunParams {
		p := newRun(n, "imports")
		p.Run.Tenant = tenant
		p.Run.ReadyAt = base.Add(time.Duration(n) * time.Microsecond)
		return p
	}
	const backlog = 50_000
	for first := 0; first < backlog; first += 5_000 {
		batch := make([]store.CreateRunParams, 0, 5_000)
		for n := first; n < first+5_000; n++ {
			batch = append(batch, mk(n, "acme"))
		}
		if _, err := s.RunCreate(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	var batch []store.CreateRunParams
	for n := backlog; n < backlog+100; n++ {
		batch = append(batch, mk(n, "beta"))
	}
	if _, err := s.RunCreate(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.render("ANALYZE {S}.runs")); err != nil {
		t.Fatal(err)
	}

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+s.render(sqlClaimFair), []string{"imports"},
		"w", base, 10, base.Add(time.Hour), base, []string{"acme"}, []bool{true})
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	t.Logf("plan:\n%s", text)
	if strings.Contains(text, "Seq Scan on runs") || !strings.Contains(text, "runs_lanes") {
		t.Errorf("the fair claim scans the backlog or misses runs_lanes:\n%s", text)
	}
	// Every node of the plan handles a handful of rows: none reads the backlog.
	for _, line := range plan {
		if i := strings.Index(line, "actual time="); i >= 0 {
			var a, b float64
			var rows, loops int
			if _, err := fmt.Sscanf(line[i:], "actual time=%f..%f rows=%d loops=%d", &a, &b, &rows, &loops); err == nil && rows*loops > 1000 {
				t.Errorf("a plan node handles %d rows:\n%s", rows*loops, line)
			}
		}
	}
}
