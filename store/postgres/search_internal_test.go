package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs/store"
)

// TestSearchUsesIndexOrder: each common shape of the run finder has a plan that reads runs in
// id order from an index (002_run_search) without sorting the matches, so a page deep into a
// million runs reads a page of index entries, whether the plan knows the values (a custom plan)
// or not (the generic plan a prepared statement gets after a few executions). The listing
// indexes hold no running run (015_claim_entries): a shape that reads one of them also reads
// the running runs through runs_lease and sorts those alone (they are at most the fleet's
// slots); a search by key reads the key's live runs through runs_live_key instead
// (016_key_entries), at most one a job. The test table is empty, so the planner is told to avoid sequential scans and sorts:
// a sort above the listing index left in the plan means the index does not serve the shape.
func TestSearchUsesIndexOrder(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{})
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, c := range map[string]struct {
		q     store.RunQuery
		index string // read in id order; "" when the matches are few and sorted
		apart string // the index the plan also reads the runs the first one leaves out through
	}{
		"all":           {store.RunQuery{ListParams: store.ListParams{Limit: 51}}, "runs_pkey", ""},
		"state":         {store.RunQuery{ListParams: store.ListParams{State: store.StateFailed, Before: "x", Limit: 51}}, "runs_state_id", ""},
		"ready":         {store.RunQuery{ListParams: store.ListParams{State: store.StateReady, Limit: 51}}, "runs_state_id", ""},
		"running":       {store.RunQuery{ListParams: store.ListParams{State: store.StateRunning, Limit: 51}}, "", "runs_lease"},
		"job":           {store.RunQuery{ListParams: store.ListParams{Job: "j", Before: "x", Limit: 51}}, "runs_job_id", "runs_lease"},
		"tenant":        {store.RunQuery{ListParams: store.ListParams{Tenant: "t", Limit: 51}}, "runs_tenant_id", ""},
		"queue":         {store.RunQuery{ListParams: store.ListParams{Queue: "q", Before: "x", Limit: 51}}, "runs_queue_id", "runs_lease"},
		"queue+state":   {store.RunQuery{ListParams: store.ListParams{Queue: "q", State: store.StateCompleted, Limit: 51}}, "runs_", ""},
		"key":           {store.RunQuery{Key: "k", ListParams: store.ListParams{Limit: 51}}, "runs_key_id", "runs_live_key"},
		"key+job":       {store.RunQuery{Key: "k", ListParams: store.ListParams{Job: "j", Queue: "q", Before: "x", Limit: 51}}, "runs_key_id", "runs_live_key"},
		"key+failed":    {store.RunQuery{Key: "k", ListParams: store.ListParams{State: store.StateFailed, Limit: 51}}, "runs_key_id", ""},
		"key+ready":     {store.RunQuery{Key: "k", ListParams: store.ListParams{State: store.StateReady, Limit: 51}}, "", "runs_live_key"},
		"created range": {store.RunQuery{CreatedFrom: base, CreatedTo: base.Add(time.Hour), ListParams: store.ListParams{Limit: 51}}, "runs_pkey", ""},
	} {
		query, args := s.searchSQL(c.q)
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			plan, err := explainPrepared(context.Background(), s, mode, query, args)
			if err != nil {
				t.Fatalf("%s, %s: %v", name, mode, err)
			}
			if strings.Contains(plan, "Seq Scan") {
				t.Errorf("%s, %s: plan scans the table:\n%s", name, mode, plan)
			}
			if want := c.apart == "runs_lease"; want != strings.Contains(plan, "runs_lease") {
				t.Errorf("%s, %s: plan reads runs_lease = %v, want %v:\n%s", name, mode, !want, want, plan)
			}
			if c.apart != "" && !strings.Contains(plan, " using "+c.apart) {
				t.Errorf("%s, %s: plan does not read %s:\n%s", name, mode, c.apart, plan)
			}
			if c.index == "" {
				continue
			}
			if !readsInOrder(plan, c.index) {
				t.Errorf("%s, %s: plan sorts its matches or does not read %s:\n%s", name, mode, c.index, plan)
			}
		}
	}
}

// explainPrepared is the plan the search query gets as a prepared statement under the given
// plan_cache_mode, with sequential scans, bitmap scans and sorts discouraged.
func explainPrepared(ctx context.Context, s *Store, mode, query string, args []any) (string, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off; SET LOCAL enable_bitmapscan = off; SET LOCAL plan_cache_mode = "+mode); err != nil {
		return "", err
	}
	// A named statement, so that the plan cache mode applies: EXPLAIN EXECUTE shows the plan the
	// prepared search gets.
	// The name is new on each call: a prepared statement outlives the transaction, on a pooled
	// connection another call may get.
	name := fmt.Sprintf("search_%d", explained.Add(1))
	if _, err := tx.Prepare(ctx, name, query); err != nil {
		return "", err
	}
	lits := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			lits[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		case time.Time:
			lits[i] = "'" + v.Format(time.RFC3339Nano) + "'"
		case *int64:
			lits[i] = fmt.Sprint(*v)
		default:
			return "", fmt.Errorf("argument %d: %T", i+1, a)
		}
	}
	return planText(ctx, tx, "EXPLAIN EXECUTE "+name+"("+strings.Join(lits, ", ")+")")
}

var explained atomic.Int64

// readsInOrder: plan (EXPLAIN's text) scans an index whose name starts with index, and no node
// above that scan sorts.
func readsInOrder(plan, index string) bool {
	lines := strings.Split(plan, "\n")
	depth := func(line string) int {
		if i := strings.Index(line, "->"); i >= 0 && strings.TrimSpace(line[:i]) == "" {
			return i
		}
		return -1 // a node's detail line, not a node
	}
	for i, line := range lines {
		if !strings.Contains(line, "Index") || !strings.Contains(line, " using "+index) {
			continue
		}
		d := depth(line)
		if i == 0 {
			d = 0
		}
		sorted := false
		for j := i; j >= 0 && d > 0; j-- {
			dj := depth(lines[j])
			if j == 0 {
				dj = 0
			}
			if dj >= 0 && dj < d {
				if strings.Contains(lines[j], "Sort") {
					sorted = true
				}
				d = dj
			}
		}
		if !sorted {
			return true
		}
	}
	return false
}
