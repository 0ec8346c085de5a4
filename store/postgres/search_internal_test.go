package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs/store"
)

// TestSearchUsesIndexOrder: each common shape of the run finder has a plan that reads runs in
// id order from an index (002_run_search) without sorting the matches, so a page deep into a
// million runs reads a page of index entries. The test table is empty, so the planner is told
// to avoid sequential scans and sorts: a "Sort" node left in the plan means no such index exists.
func TestSearchUsesIndexOrder(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{})
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, c := range map[string]struct {
		q     store.RunQuery
		index string
	}{
		"all":           {store.RunQuery{ListParams: store.ListParams{Limit: 51}}, "runs_pkey"},
		"state":         {store.RunQuery{ListParams: store.ListParams{State: store.StateFailed, Before: "x", Limit: 51}}, "runs_state_id"},
		"job":           {store.RunQuery{ListParams: store.ListParams{Job: "j", Before: "x", Limit: 51}}, "runs_job_id"},
		"tenant":        {store.RunQuery{ListParams: store.ListParams{Tenant: "t", Limit: 51}}, "runs_tenant_id"},
		"queue":         {store.RunQuery{ListParams: store.ListParams{Queue: "q", Before: "x", Limit: 51}}, "runs_queue_id"},
		"key":           {store.RunQuery{Key: "k", ListParams: store.ListParams{Limit: 51}}, "runs_key_id"},
		"created range": {store.RunQuery{CreatedFrom: base, CreatedTo: base.Add(time.Hour), ListParams: store.ListParams{Limit: 51}}, "runs_pkey"},
	} {
		query, args := s.searchSQL(c.q)
		ctx := context.Background()
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		err = func() error {
			defer conn.Release()
			tx, err := conn.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off; SET LOCAL enable_bitmapscan = off"); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, "EXPLAIN "+query, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					return err
				}
				plan = append(plan, strings.TrimSpace(line))
			}
			return rows.Err()
		}()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		text := strings.Join(plan, " | ")
		if strings.Contains(text, "Sort") || !strings.Contains(text, c.index) {
			t.Errorf("%s: plan %q sorts its matches or does not read %s", name, text, c.index)
		}
	}
}
