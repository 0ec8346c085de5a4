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

	// As the store sends it (its settings make it a generic plan), and as an explicitly prepared
	// statement's generic plan, planned before any parameter value is known.
	checkClaimPlan(t, s, "EXPLAIN (ANALYZE, BUFFERS) "+s.render(sqlClaimFair), []string{"imports"},
		[]string{"w"}, base, 10, base.Add(time.Hour), base, []string{"acme"}, []bool{true})
	// The shared form (two workers' shares) reads the same way.
	checkClaimPlan(t, s, "EXPLAIN (ANALYZE, BUFFERS) "+s.render(sqlClaimFairShared), []string{"imports"},
		[]string{"w", "v"}, base, 10, base.Add(time.Hour), base, []string{"acme"}, []bool{true}, []int32{5, 5})
	checkClaimPlan(t, s, "PREPARE fair_claim(text[], text[], timestamptz, integer, timestamptz, timestamptz, text[], boolean[]) AS "+
		s.render(sqlClaimFair))
}

// checkClaimPlan runs query (a PREPARE of the fair claim, or an EXPLAIN of it) in a transaction
// under the fair claim's settings and checks the plan of its claim: index probes only, every
// node handling a handful of rows, claim_at inlined, and the lane heads read from the walk's
// entry on. It rolls back.
func checkClaimPlan(t *testing.T, s *Store, query string, args ...any) {
	t.Helper()
	ctx := t.Context()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, s.render(sqlClaimFairSettings)); err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(query, "PREPARE") {
		if _, err := tx.Exec(ctx, query); err != nil {
			t.Fatal(err)
		}
		query = `EXPLAIN (ANALYZE, BUFFERS) EXECUTE fair_claim('{imports}', '{w}', '2026-01-01T00:00:00Z', 10,
			'2026-01-01T01:00:00Z', '2026-01-01T00:00:00Z', '{acme}', '{true}')`
	}
	text, err := planText(ctx, tx, query, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan:\n%s", text)
	if strings.Contains(text, "Seq Scan on runs") || strings.Contains(text, "Bitmap") ||
		!strings.Contains(text, "runs_lanes") {
		t.Errorf("the fair claim scans the backlog or misses runs_lanes:\n%s", text)
	}
	if !strings.Contains(text, "Tid Scan on runs") {
		t.Errorf("the claim's UPDATE does not take its rows by the tuple ids it locked:\n%s", text)
	}
	if strings.Contains(text, "claim_at(") {
		t.Errorf("claim_at is called, not inlined:\n%s", text)
	}
	if !strings.Contains(text, "ROW(") {
		t.Errorf("the lane heads are not read from the walk's entry on (no row comparison in an index condition):\n%s", text)
	}
	// Every node of the plan handles a handful of rows: none reads the backlog.
	for _, line := range strings.Split(text, "\n") {
		if i := strings.Index(line, "actual time="); i >= 0 {
			var a, b float64
			var rows, loops int
			if _, err := fmt.Sscanf(line[i:], "actual time=%f..%f rows=%d loops=%d", &a, &b, &rows, &loops); err == nil && rows*loops > 1000 {
				t.Errorf("a plan node handles %d rows:\n%s", rows*loops, line)
			}
		}
	}
}
