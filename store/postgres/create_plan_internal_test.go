package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs/store"
)

// TestCreateReadsLiveRunsByProbe holds the create's read of each key's live run to one index
// probe a (job, tenant, key) under the plan a prepared statement is given once its table has grown past the
// statistics it was planned from: the statistics taken when nearly every run had finished, then
// a backlog of ready ones. The join form of that read was planned there as a scan of every live run hashed
// against the keys, and a create read the whole backlog.
func TestCreateReadsLiveRunsByProbe(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{})
	ctx := context.Background()
	create := func(first, n int) {
		ps := make([]store.CreateRunParams, n)
		for i := range ps {
			ps[i] = newRun(first+i, "q")
		}
		if _, err := s.RunCreate(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	// A backlog worked off: 2,000 runs finished and 8 live when the statistics are taken.
	create(1, 2008)
	for range 2 {
		runs, err := s.RunClaim(ctx, store.ClaimParams{WorkerID: "w", Queues: []string{"q"}, Limit: 1000, Now: t0,
			LeaseUntil: t0.Add(time.Hour), StickyBefore: t0})
		if err != nil {
			t.Fatal(err)
		}
		ms := make([]store.Mutation, len(runs))
		for i, r := range runs {
			ms[i] = store.Mutation{RunID: r.ID, Fence: r.Fence, Now: t0,
				Transition: store.Transition{State: store.StateCompleted, Result: []byte("r")}}
		}
		applyAll(t, s, ms)
	}
	if _, err := s.pool.Exec(ctx, s.render("ANALYZE {S}.runs")); err != nil {
		t.Fatal(err)
	}
	for b := 0; b < 5; b++ { // then a new backlog
		create(10000+b*1000, 1000)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "PREPARE live(text[], text[], text[]) AS "+s.q(stmtRunsLive)); err != nil {
		t.Fatal(err)
	}
	jobNames, tenants, keys := make([]string, 32), make([]string, 32), make([]string, 32)
	for i := range keys {
		jobNames[i], tenants[i], keys[i] = "job", `""`, fmt.Sprintf("key-%d", 10000+i*7)
	}
	// Planned with the keys in hand and without: a prepared statement gets both in turn.
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		plan, err := planText(ctx, conn, fmt.Sprintf("EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) EXECUTE live('{%s}', '{%s}', '{%s}')",
			strings.Join(jobNames, ","), strings.Join(tenants, ","), strings.Join(keys, ",")))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan, "Index Cond: ((key = p.k) AND (job = p.j) AND (tenant = p.t))") || !strings.Contains(plan, "rows=32 ") {
			t.Errorf("%s: the live runs' read is not one probe of runs_live_key a key, or did not find the 32 runs:\n%s", mode, plan)
		}
	}
}
