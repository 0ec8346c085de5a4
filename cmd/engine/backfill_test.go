package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// sweepTable is a table of n rows, keyset on the index, that a backfill marks.
type sweepTable struct {
	mu   sync.Mutex
	done []bool
	hold chan struct{} // when set, page 1 waits for it
}

func (s *sweepTable) source() backfill.Source[int] {
	return backfill.SourceFunc[int](func(_ context.Context, req backfill.PageRequest) ([]int, backfill.Cursor, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		after := int64(-1)
		if req.After != nil {
			after, _ = backfill.ParseCount(req.After[0])
		}
		var out []int
		for i := int(after) + 1; i < len(s.done) && len(out) < req.Limit; i++ {
			out = append(out, i)
		}
		if len(out) == 0 {
			return nil, nil, nil
		}
		return out, backfill.Cursor{int64(out[len(out)-1])}, nil
	})
}

func (s *sweepTable) handle(_ context.Context, b backfill.Batch[int]) error {
	if b.Index == 1 && s.hold != nil {
		<-s.hold
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range b.Rows {
		s.done[i] = true
	}
	return nil
}

func (s *sweepTable) left(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := int64(0)
	for _, d := range s.done {
		if !d {
			n++
		}
	}
	return n, nil
}

// appDB is an application database whose golang-migrate ledger is at version 5.
func appDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`CREATE TABLE schema_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (5, false)`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return "sqlite:" + path
}

func TestBackfillCommands(t *testing.T) {
	t.Parallel()
	swept := &sweepTable{done: make([]bool, 25)}
	held := &sweepTable{done: make([]bool, 10), hold: make(chan struct{})}
	nothing := &sweepTable{}
	sweep := backfill.MustDefine("cli-sweep", backfill.AllTenants(), swept.source(), swept.handle,
		backfill.BatchSize(10), backfill.Rate(1e6), backfill.Count(swept.left))
	prodOnly := backfill.MustDefine("cli-prod-only", backfill.AllTenants(), nothing.source(), nothing.handle, backfill.Environments("production"))
	later := backfill.MustDefine("cli-needs-7", backfill.AllTenants(), nothing.source(), nothing.handle, backfill.Requires("7"))
	ready := backfill.MustDefine("cli-needs-3", backfill.AllTenants(), nothing.source(), nothing.handle, backfill.Requires("3"), backfill.Rate(1e6))
	slow := backfill.MustDefine("cli-held", backfill.AllTenants(), held.source(), held.handle, backfill.BatchSize(5), backfill.Rate(1e6),
		backfill.Count(held.left))
	defs := []jobs.Definition{sweep, prodOnly, later, ready, slow}
	declared := []backfill.Declaration{sweep.Declaration(), prodOnly.Declaration()}
	var mu sync.Mutex
	provider := func(context.Context) ([]backfill.Declaration, error) {
		mu.Lock()
		defer mu.Unlock()
		return append([]backfill.Declaration(nil), declared...), nil
	}

	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}, Backfills: provider})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)
	env.Worker(worker.Config{PollWait: 100 * time.Millisecond}, defs...)
	o := &opsEnv{env: env, server: []string{"--server", ts.URL}}

	// Usage.
	expect(t, o.run(t, "backfill"), 2, "X_BAD_REQUEST: ")
	expect(t, o.run(t, "backfill", "cli-sweep", "--force"), 2, "X_BAD_REQUEST: ")
	expect(t, o.run(t, "backfill", "--list", "--status", "bogus"), 2, "X_BAD_REQUEST: ")
	expect(t, o.run(t, "backfill", "nope"), 1, "X_JOB_UNKNOWN: ")

	// Declared, never run: pending, and a deploy check reads the exit code alone.
	r := o.run(t, "backfill", "--pending", "--env", "staging", "--json")
	expect(t, r, 1, "X_BACKFILL_PENDING: ")
	var rep backfill.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Pending) != 1 || rep.Pending[0] != "cli-sweep" {
		t.Fatalf("pending --json printed %q (%v)", r.stdout, err)
	}
	r = o.run(t, "backfill", "--pending", "--env", "staging")
	expect(t, r, 1, "X_BACKFILL_PENDING: ")
	if !strings.Contains(r.stdout, "cli-prod-only  excluded") || !strings.Contains(r.stdout, "cli-sweep      pending") {
		t.Fatalf("pending printed\n%s", r.stdout)
	}

	// A dry run writes nothing.
	r = o.run(t, "backfill", "cli-sweep", "--env", "staging")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "would run") || !strings.Contains(r.stdout, "count: not yet taken") {
		t.Fatalf("dry run printed\n%s", r.stdout)
	}
	if runs, _ := env.Engine.ListRuns(context.Background(), store.ListParams{Limit: 10}); len(runs) != 0 {
		t.Fatalf("a dry run enqueued %d runs", len(runs))
	}
	expect(t, o.run(t, "backfill", "cli-prod-only", "--env", "staging"), 1, "X_BACKFILL_ENVIRONMENT: ")

	// --write enqueues; the worker sweeps.
	r = o.run(t, "backfill", "cli-sweep", "--env", "staging", "--write", "--json")
	expect(t, r, 0, "")
	var out struct {
		Backfills []dryRun `json:"backfills"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Backfills) != 1 || out.Backfills[0].RunID == "" {
		t.Fatalf("--write printed %q (%v)", r.stdout, err)
	}
	first := out.Backfills[0].RunID
	env.Await(first, store.StateCompleted)
	expect(t, o.run(t, "backfill", "--pending", "--env", "staging"), 0, "")
	r = o.run(t, "backfill", "cli-sweep", "--env", "staging")
	expect(t, r, 1, "X_BACKFILL_APPLIED: ")
	if !strings.Contains(r.stdout, "count: 25 at the start of pass "+first) {
		t.Fatalf("dry run after a pass printed\n%s", r.stdout)
	}
	r = o.run(t, "backfill", "cli-sweep", "--env", "staging", "--write", "--force")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "enqueued run") {
		t.Fatalf("--force printed\n%s", r.stdout)
	}

	// --list reads the ledger.
	var list struct {
		Backfills []backfill.Progress `json:"backfills"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = o.run(t, "backfill", "--list", "--name", "cli-sweep", "--status", "completed", "--json")
		expect(t, r, 0, "")
		if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Backfills) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(list.Backfills) != 2 || list.Backfills[1].RunID != first || list.Backfills[1].Rows != 25 {
		t.Fatalf("--list printed %q", r.stdout)
	}
	r = o.run(t, "backfill", "--list", "--limit", "1")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "ROWS/S") || strings.Count(r.stdout, "cli-sweep") != 1 {
		t.Fatalf("--list --limit 1 printed\n%s", r.stdout)
	}

	// jobs show carries the run's ledger row; a plain run's is null.
	r = o.run(t, "jobs", "show", first, "--json")
	expect(t, r, 0, "")
	var show struct {
		ID       string             `json:"id"`
		Backfill *backfill.Progress `json:"backfill"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &show); err != nil || show.ID != first || show.Backfill == nil || show.Backfill.Rows != 25 {
		t.Fatalf("jobs show --json printed %q (%v)", r.stdout, err)
	}
	r = o.run(t, "jobs", "show", first)
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "backfill cli-sweep") || !strings.Contains(r.stdout, "rows:    25 in 3 batches") {
		t.Fatalf("jobs show printed\n%s", r.stdout)
	}

	// A pass in flight shows in jobs ls with its rows so far and cursor.
	res, err := slow.Enqueue(context.Background(), env.Engine, backfill.Input{})
	if err != nil {
		t.Fatal(err)
	}
	var ls struct {
		Backfills []backfill.Progress `json:"backfills"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		r = o.run(t, "jobs", "ls", "--json")
		expect(t, r, 0, "")
		_ = json.Unmarshal([]byte(r.stdout), &ls)
		if (len(ls.Backfills) == 1 && ls.Backfills[0].Rows == 5) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(ls.Backfills) != 1 || ls.Backfills[0].RunID != res.RunID || ls.Backfills[0].Cursor != "[4]" ||
		ls.Backfills[0].Left == nil || *ls.Backfills[0].Left != 5 {
		t.Fatalf("jobs ls --json: backfills %+v", ls.Backfills)
	}
	r = o.run(t, "jobs", "ls")
	if !strings.Contains(r.stdout, "cli-held") || !strings.Contains(r.stdout, "[4]") {
		t.Fatalf("jobs ls printed\n%s", r.stdout)
	}
	// The same projection feeds the metrics.
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`backfill_rows{backfill="cli-held",run="` + res.RunID + `"} 5`,
		`backfill_rows_left{backfill="cli-held",run="` + res.RunID + `"} 5`, `backfill_rows_per_second{backfill="cli-held"`} {
		if !strings.Contains(string(metrics), want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
	close(held.hold)
	env.Await(res.RunID, store.StateCompleted)

	// --all isolates per name: the refused one is reported, the next still enqueued.
	mu.Lock()
	declared = append(declared, later.Declaration(), ready.Declaration())
	mu.Unlock()
	r = o.run(t, "backfill", "--all", "--write", "--env", "staging", "--migrations", appDB(t), "--json")
	expect(t, r, 1, "X_BACKFILL_MIGRATION_PENDING: ")
	out.Backfills = nil
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Backfills) != 2 {
		t.Fatalf("--all printed %q (%v)", r.stdout, err)
	}
	for _, b := range out.Backfills {
		switch b.Name {
		case "cli-needs-7":
			if b.Run || b.Code != string(jobs.CodeBackfillMigrationPending) || b.Migration != "pending" {
				t.Fatalf("cli-needs-7: %+v", b)
			}
		case "cli-needs-3":
			if !b.Run || b.RunID == "" || b.Migration != "applied" {
				t.Fatalf("cli-needs-3: %+v", b)
			}
			env.Await(b.RunID, store.StateCompleted)
		default:
			t.Fatalf("--all took %s", b.Name)
		}
	}
	// An unreadable migrations ledger (a database without one) is no refusal.
	empty := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil { // an empty file is an empty SQLite database
		t.Fatal(err)
	}
	r = o.run(t, "backfill", "cli-needs-7", "--env", "staging", "--migrations", "sqlite:"+empty)
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "requires: migration unknown") {
		t.Fatalf("unreadable ledger printed\n%s", r.stdout)
	}
	// A path to no database is a mistake on the command line: refused, and no file is made there
	// (an empty database made at a mistyped path would read as "unknown" and let the pass run).
	none := filepath.Join(t.TempDir(), "none.db")
	expect(t, o.run(t, "backfill", "cli-needs-7", "--env", "staging", "--migrations", "sqlite:"+none), 2, "X_BAD_REQUEST: --migrations: no SQLite database at")
	if _, err := os.Stat(none); !os.IsNotExist(err) {
		t.Fatalf("the mistyped path now holds a file: %v", err)
	}
}
