package postgres

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/ultimat3/jobs/store"
)

// TestStepsLockReadsRunsByPrimaryKey holds the steps statement's lock step to the batch's own
// rows, found through the primary key, whatever the statistics say: planned from statistics
// taken while few runs were running and then run with thousands running, its join to the batch
// was a scan of every running run through runs_lease, hashed against the batch, so each group
// commit read every lease of the fleet.
func TestStepsLockReadsRunsByPrimaryKey(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{})
	ctx := context.Background()
	// A fleet worked off: 3,000 runs finished and 4 running when the statistics are taken.
	done := runningRuns(t, s, 1, 3004, "q")
	ms := make([]store.Mutation, 3000)
	for i := range ms {
		ms[i] = store.Mutation{RunID: done[i].ID, Fence: done[i].Fence, Now: t0,
			Transition: store.Transition{State: store.StateCompleted, Result: []byte("r")}}
	}
	applyAll(t, s, ms)
	if _, err := s.pool.Exec(ctx, s.render("ANALYZE {S}.runs")); err != nil {
		t.Fatal(err)
	}
	runs := runningRuns(t, s, 10000, 3000, "q") // then thousands running
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "PREPARE steps AS "+s.q(stmtStepsApply)); err != nil {
		t.Fatal(err)
	}
	ids, fences := make([]string, 16), make([]string, 16)
	for i := range ids {
		ids[i], fences[i] = runs[i*100].ID, strconv.FormatInt(runs[i*100].Fence, 10)
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		plan, err := planText(ctx, conn, `EXPLAIN EXECUTE steps('{`+strings.Join(ids, ",")+`}'::text[], '{`+strings.Join(fences, ",")+`}'::bigint[],
			array_fill(1::bigint, ARRAY[16]), array_fill(''::text, ARRAY[16]), array_fill(NULL::bytea, ARRAY[16]),
			array_fill(now(), ARRAY[16]), '{}'::text[], '{}'::bigint[], '{}'::text[], '{}'::text[],
			'{}'::timestamptz[], '{}'::bytea[], array_fill(0::bigint, ARRAY[16]))`)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(plan, "runs_lease") || !strings.Contains(plan, "runs_pkey") {
			t.Errorf("%s: the lock step does not find the batch's runs by primary key:\n%s", mode, plan)
		}
	}
}
