package sqlite

import (
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs/store"
)

// searchQueries are the run finder's common shapes; each must be served in id order from an
// index (002_run_search), never by sorting every match: a page deep into a million runs then
// reads a page of index entries.
var searchQueries = map[string]struct {
	q     store.RunQuery
	index string
}{
	"all":           {store.RunQuery{ListParams: store.ListParams{Limit: 51}}, "sqlite_autoindex_runs_1"},
	"all, deep":     {store.RunQuery{ListParams: store.ListParams{Before: "x", Limit: 51}}, "sqlite_autoindex_runs_1"},
	"state":         {store.RunQuery{ListParams: store.ListParams{State: store.StateFailed, Before: "x", Limit: 51}}, "runs_state_id"},
	"job":           {store.RunQuery{ListParams: store.ListParams{Job: "j", Before: "x", Limit: 51}}, "runs_job_id"},
	"tenant":        {store.RunQuery{ListParams: store.ListParams{Tenant: "t", Limit: 51}}, "runs_tenant_id"},
	"queue":         {store.RunQuery{ListParams: store.ListParams{Queue: "q", Before: "x", Limit: 51}}, "runs_queue_id"},
	"key":           {store.RunQuery{Key: "k", ListParams: store.ListParams{Limit: 51}}, "runs_key_id"},
	"created range": {store.RunQuery{CreatedFrom: base, CreatedTo: base.Add(time.Hour), ListParams: store.ListParams{Limit: 51}}, "sqlite_autoindex_runs_1"},
}

func TestSearchUsesIndexOrder(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	for name, c := range searchQueries {
		query, args := searchSQL(c.q)
		rows, err := s.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		text := strings.Join(plan, "; ")
		if strings.Contains(text, "TEMP B-TREE") || !strings.Contains(text, c.index) {
			t.Errorf("%s: plan %q sorts its matches or does not read %s", name, text, c.index)
		}
	}
}
