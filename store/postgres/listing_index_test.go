package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/storetest"
)

// TestListingIndexesSkipRunningRuns: the state, job and queue indexes hold no running run
// (015_claim_entries), so a claim writes none of their entries; the key index holds no live
// run, and the idempotency index, keyed by key first, lists those (016_key_entries; (key, job,
// tenant) since 021_incompatible_tenant_key), so a create writes no key index entry. The run
// search still returns every matching run, running and live ones included, newest first, a page
// at a time. The migrations are also applied over runs in every state: the schema is taken back
// to 014's indexes, the runs written, and Migrate run again.
func TestListingIndexesSkipRunningRuns(t *testing.T) {
	t.Parallel()
	for _, over := range []bool{false, true} {
		t.Run(fmt.Sprintf("migrated over runs %v", over), func(t *testing.T) {
			t.Parallel()
			s := OpenTest(t, Config{})
			ctx := context.Background()
			if over {
				if _, err := s.pool.Exec(ctx, schemaReplacer(s.schema).Replace(`
DROP INDEX {S}.runs_state_id; CREATE INDEX runs_state_id ON {S}.runs (state, id);
DROP INDEX {S}.runs_job_id; CREATE INDEX runs_job_id ON {S}.runs (job, id);
DROP INDEX {S}.runs_queue_id; CREATE INDEX runs_queue_id ON {S}.runs (queue, id);
DROP INDEX {S}.runs_key_id; CREATE INDEX runs_key_id ON {S}.runs (key, id);
DROP INDEX {S}.runs_worker; CREATE INDEX runs_worker ON {S}.runs (worker_id) WHERE worker_id <> '';
DROP INDEX {S}.runs_live_key; CREATE UNIQUE INDEX runs_live_key ON {S}.runs (job, key)
	WHERE state IN ('ready', 'delayed', 'running', 'suspended');
DELETE FROM {S}.schema_migrations WHERE version IN (15, 16, 21)`)); err != nil {
					t.Fatal(err)
				}
			}
			all := seedRuns(t, s)
			if over {
				if n, err := MigrateCount(ctx, Config{URL: testURL(t), Schema: s.schema}); n != 3 || err != nil {
					t.Fatalf("MigrateCount = %d, %v; want 015, 016 and 021 applied", n, err)
				}
			}
			for name, want := range map[string]string{
				"runs_state_id": "(state, id) WHERE (state <> 'running'::text)",
				"runs_job_id":   "(job, id) WHERE (state <> 'running'::text)",
				"runs_queue_id": "(queue, id) WHERE (state <> 'running'::text)",
				"runs_key_id":   "(key, id) WHERE (state <> ALL (ARRAY['ready'::text, 'delayed'::text, 'running'::text, 'suspended'::text]))",
				"runs_live_key": "(key, job, tenant) WHERE (state = ANY (ARRAY['ready'::text, 'delayed'::text, 'running'::text, 'suspended'::text]))",
			} {
				var def string
				if err := s.pool.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = $2`,
					s.schema, name).Scan(&def); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !strings.HasSuffix(def, want) {
					t.Errorf("%s is %q; want it on %s", name, def, want)
				}
			}
			checkSearches(t, s, all)
		})
	}
}

// seededRun is one run seedRuns wrote.
type seededRun struct {
	id, job, queue, key string
	state               store.State
}

// seedRuns writes 40 runs over two jobs and three queues in every state, running ones with a
// lease and a worker; the finished ones share a key, and one key is live in both jobs and
// finished in one.
func seedRuns(t *testing.T, s *Store) []seededRun {
	t.Helper()
	states := []store.State{store.StateReady, store.StateRunning, store.StateCompleted, store.StateRunning,
		store.StateFailed, store.StateSuspended, store.StateRunning, store.StateDelayed, store.StateCancelled,
		store.StateBlocked}
	var all []seededRun
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 40 {
		r := seededRun{id: fmt.Sprintf("r%02d", i), job: fmt.Sprintf("j%d", i%2), queue: fmt.Sprintf("q%d", i%3),
			key: fmt.Sprintf("k%02d", i), state: states[i%len(states)]}
		if r.state == store.StateCompleted || r.state == store.StateFailed {
			r.key = "done"
		}
		if i == 30 || i == 31 || i == 32 { // one key, live in both jobs and finished in one
			r.key = "shared"
		}
		all = append(all, r)
		if _, err := s.pool.Exec(context.Background(), schemaReplacer(s.schema).Replace(`
INSERT INTO {S}.runs (id, job, queue, key, state, worker_id, lease_until, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, CASE WHEN $5 = 'running' THEN 'w' ELSE '' END,
	CASE WHEN $5 = 'running' THEN $6::timestamptz END, $6, $6)`),
			r.id, r.job, r.queue, r.key, string(r.state), at); err != nil {
			t.Fatal(err)
		}
	}
	return all
}

// checkSearches pages through the search's shapes over the runs seedRuns wrote and compares
// each with the matching runs, newest first.
func checkSearches(t *testing.T, s *Store, all []seededRun) {
	t.Helper()
	for _, q := range []store.RunQuery{
		{ListParams: store.ListParams{Job: "j1", Limit: 4}},
		{ListParams: store.ListParams{Queue: "q0", Limit: 3}},
		{ListParams: store.ListParams{Queue: "q2", Job: "j0", Limit: 2}},
		{Key: "done", ListParams: store.ListParams{Limit: 3}},
		{Key: "k01", ListParams: store.ListParams{Limit: 3}},
		{Key: "k00", ListParams: store.ListParams{Limit: 3}},
		{Key: "shared", ListParams: store.ListParams{Limit: 1}},
		{Key: "shared", ListParams: store.ListParams{Job: "j0", Limit: 1}},
		{Key: "shared", ListParams: store.ListParams{State: store.StateReady, Limit: 1}},
		{Key: "shared", ListParams: store.ListParams{State: store.StateCompleted, Limit: 1}},
		{Key: "done", ListParams: store.ListParams{State: store.StateFailed, Limit: 2}},
		{ListParams: store.ListParams{State: store.StateRunning, Limit: 4}},
		{ListParams: store.ListParams{State: store.StateRunning, Job: "j0", Limit: 2}},
		{ListParams: store.ListParams{State: store.StateReady, Limit: 2}},
		{ListParams: store.ListParams{Limit: 7}},
	} {
		var want []string
		for _, r := range slices.Backward(all) {
			if (q.Job == "" || r.job == q.Job) && (q.Queue == "" || r.queue == q.Queue) &&
				(q.Key == "" || r.key == q.Key) && (q.State == "" || r.state == q.State) {
				want = append(want, r.id)
			}
		}
		// Every page, each after the last one's final id, until a short page.
		got := storetest.SearchIDs(t, s, q)
		if !slices.Equal(got, want) {
			t.Errorf("search %+v: got %v, want %v", q, got, want)
		}
	}
	// The worker's running runs are found (through runs_lease) and handed back.
	var running []string
	for _, r := range all {
		if r.state == store.StateRunning {
			running = append(running, r.id)
		}
	}
	woken, err := s.WorkerRelease(context.Background(), "w", time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, w := range woken {
		ids = append(ids, w.RunID)
	}
	if !slices.Equal(ids, running) {
		t.Errorf("WorkerRelease(w) woke %v; want %v", ids, running)
	}
}

// TestWorkerReleaseReadsItsOwnRuns: runs_worker holds no running run (015_claim_entries), so
// WorkerRelease finds a worker's running runs through runs_lease and its sticky ones through
// runs_worker, never a scan of every run, with the worker's id known to the plan or not.
func TestWorkerReleaseReadsItsOwnRuns(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{})
	ctx := context.Background()
	var def string
	if err := s.pool.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'runs_worker'`,
		s.schema).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(def, "state <> 'running'::text") {
		t.Errorf("runs_worker is %q; want it to leave out running runs", def)
	}
	query := schemaReplacer(s.schema).Replace(sqlWorkerRelease)
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		plan, err := explainPrepared(ctx, s, mode, query, []any{"w1", time.Now(), "ch"})
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, "runs_worker") || !strings.Contains(plan, "runs_lease") {
			t.Errorf("%s: plan does not read runs_worker and runs_lease alone:\n%s", mode, plan)
		}
	}
}
