package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// orgTable is an application table shared by tenants: row i belongs to tenant tenants[i%len].
// A per-tenant backfill's pages and count see one tenant's rows.
type orgTable struct {
	mu      sync.Mutex
	tenants []string
	done    []bool
	handled []int
	hold    map[string]chan struct{} // a tenant's first page waits for its channel
}

func newOrgTable(n int, tenants ...string) *orgTable {
	return &orgTable{tenants: tenants, done: make([]bool, n), handled: make([]int, n), hold: map[string]chan struct{}{}}
}

func (s *orgTable) tenantOf(i int) string { return s.tenants[i%len(s.tenants)] }

func (s *orgTable) source() backfill.Source[int] {
	return backfill.SourceFunc[int](func(_ context.Context, req backfill.PageRequest) ([]int, backfill.Cursor, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		after := int64(-1)
		if req.After != nil {
			after, _ = backfill.ParseCount(req.After[0])
		}
		var out []int
		for i := int(after) + 1; i < len(s.done) && len(out) < req.Limit; i++ {
			if !s.done[i] && s.tenantOf(i) == req.Tenant {
				out = append(out, i)
			}
		}
		if len(out) == 0 {
			return nil, nil, nil
		}
		return out, backfill.Cursor{int64(out[len(out)-1])}, nil
	})
}

func (s *orgTable) handle(_ context.Context, b backfill.Batch[int]) error {
	if len(b.Rows) > 0 {
		s.mu.Lock()
		hold := s.hold[s.tenantOf(b.Rows[0])]
		s.mu.Unlock()
		if hold != nil {
			<-hold
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range b.Rows {
		s.done[i] = true
		s.handled[i]++
	}
	return nil
}

func (s *orgTable) left(_ context.Context, req backfill.CountRequest) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := int64(0)
	for i, d := range s.done {
		if !d && s.tenantOf(i) == req.Tenant {
			n++
		}
	}
	return n, nil
}

// swept reports how many of tenant's rows are done, and of how many.
func (s *orgTable) swept(tenant string) (done, of int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, d := range s.done {
		if s.tenantOf(i) == tenant {
			of++
			if d {
				done++
			}
		}
	}
	return done, of
}

// A per-tenant backfill through the command line: its gate, dry run, enqueue key, pending
// report and ledger listing are per (name, tenant). Before, once tenant a's pass completed,
// `backfill NAME --tenant b` was refused X_BACKFILL_APPLIED (the gate read every tenant's
// passes), and --write enqueued under the key NAME, beside (not onto) a live pass the application
// had enqueued for that tenant under NAME/tenant.
func TestBackfillCommandsPerTenant(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{Clock: clock.Real{}}, func(t *testing.T, env *testenv.Env) {
		perTenantCLI(t, env)
	})
}

func perTenantCLI(t *testing.T, env *testenv.Env) {
	ctx := context.Background()
	tbl := newOrgTable(30, "org-a", "org-b", "org-c")
	holdC := make(chan struct{})
	tbl.hold["org-c"] = holdC
	released := false
	release := func() {
		if !released {
			released = true
			close(holdC)
		}
	}
	t.Cleanup(release) // before the worker stops (cleanups run last first)
	org := backfill.MustDefine("cli-org", backfill.PerTenant(), tbl.source(), tbl.handle,
		backfill.BatchSize(4), backfill.Rate(1e6), backfill.CountFor(tbl.left))
	nothing := &sweepTable{}
	every := backfill.MustDefine("cli-every", backfill.AllTenants(), nothing.source(), nothing.handle, backfill.Rate(1e6))

	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)
	// Without a provider the engine reads the declarations from the worker's manifest.
	env.Worker(worker.Config{PollWait: 100 * time.Millisecond}, org, every)
	o := &opsEnv{env: env, server: []string{"--server", ts.URL}}
	var out struct {
		Backfills []dryRun `json:"backfills"`
	}
	decode := func(r result) []dryRun {
		t.Helper()
		out.Backfills = nil
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("not JSON: %q (%v)", r.stdout, err)
		}
		return out.Backfills
	}

	// The verdict is a tenant's: a dry run needs --tenant as much as --write does, and --tenant
	// on a backfill of every tenant is a mistake, not ignored.
	expect(t, o.run(t, "backfill", "cli-org", "--env", "staging"), 1, "X_JOB_TENANT_REQUIRED: ")
	expect(t, o.run(t, "backfill", "cli-org", "--env", "staging", "--write"), 1, "X_JOB_TENANT_REQUIRED: ")
	expect(t, o.run(t, "backfill", "cli-every", "--env", "staging", "--tenant", "org-a"), 2, "X_BAD_REQUEST: ")

	// Tenant a's pass: enqueued under the pass's own key, and it sweeps a's rows only.
	r := o.run(t, "backfill", "cli-org", "--env", "staging", "--tenant", "org-a", "--write", "--json")
	expect(t, r, 0, "")
	bs := decode(r)
	if len(bs) != 1 || bs[0].RunID == "" || bs[0].Tenant != "org-a" {
		t.Fatalf("--write for org-a printed %q", r.stdout)
	}
	passA := bs[0].RunID
	if run := env.Await(passA, store.StateCompleted); run.Key != "cli-org/org-a" || run.Tenant != "org-a" {
		t.Fatalf("org-a's pass: key %q, tenant %q; want cli-org/org-a, org-a", run.Key, run.Tenant)
	}
	if done, of := tbl.swept("org-a"); done != of {
		t.Fatalf("org-a: %d of %d rows swept", done, of)
	}
	if done, _ := tbl.swept("org-b"); done != 0 {
		t.Fatalf("org-a's pass swept %d of org-b's rows", done)
	}

	// a is done; b's verdict is b's own.
	r = o.run(t, "backfill", "cli-org", "--env", "staging", "--tenant", "org-a")
	expect(t, r, 1, `X_BACKFILL_APPLIED: backfill "cli-org" already completed for tenant "org-a"`)
	if !strings.Contains(r.stdout, "count: 10 at the start of pass "+passA) {
		t.Fatalf("org-a's dry run after its pass printed\n%s", r.stdout)
	}
	r = o.run(t, "backfill", "cli-org", "--env", "staging", "--tenant", "org-b")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "cli-org (tenant org-b): would run") || !strings.Contains(r.stdout, "count: not yet taken") ||
		strings.Contains(r.stdout, passA) {
		t.Fatalf("org-b's dry run (its count and last pass are its own, not org-a's) printed\n%s", r.stdout)
	}

	// --pending: the name reads the worst of its known tenants (completed), each known tenant
	// under it; with --tenant, that tenant's state, and exit 1 when it is unswept.
	r = o.run(t, "backfill", "--pending", "--env", "staging")
	expect(t, r, 1, "X_BACKFILL_PENDING: ") // cli-every never ran
	if !strings.Contains(r.stdout, "tenant org-a:") || !strings.Contains(r.stdout, passA) {
		t.Fatalf("--pending printed\n%s", r.stdout)
	}
	lines := strings.Split(r.stdout, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "cli-org ") && (i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "  tenant org-a:") ||
			!strings.Contains(lines[i+1], "completed")) {
			t.Fatalf("--pending: cli-org's row is not followed by org-a's state:\n%s", r.stdout)
		}
	}
	r = o.run(t, "backfill", "--pending", "--env", "staging", "--tenant", "org-b", "--json")
	expect(t, r, 1, `X_BACKFILL_PENDING: 2 unswept in environment "staging" for tenant "org-b": `)
	var tr tenantReport
	if err := json.Unmarshal([]byte(r.stdout), &tr); err != nil || tr.Tenant != "org-b" || len(tr.Pending) != 2 {
		t.Fatalf("--pending --tenant org-b --json printed %q (%v)", r.stdout, err)
	}
	for _, row := range tr.Rows {
		if row.Name == "cli-org" && (row.State != backfill.StatePending || row.RunID != "" || len(row.Tenants) != 1 ||
			row.Tenants[0] != (backfill.TenantState{Tenant: "org-b", State: backfill.StatePending})) {
			t.Fatalf("--pending --tenant org-b: cli-org is %+v; want pending for org-b", row)
		}
	}
	r = o.run(t, "backfill", "--pending", "--env", "staging", "--tenant", "org-a")
	expect(t, r, 1, `X_BACKFILL_PENDING: 1 unswept in environment "staging" for tenant "org-a": cli-every`)
	if !strings.Contains(r.stdout, "TENANT") || !containsRow(r.stdout, "cli-org", "org-a", "completed", passA) {
		t.Fatalf("--pending --tenant org-a printed\n%s", r.stdout)
	}

	// --all: without --tenant a per-tenant backfill is skipped, and said so, and the others go
	// on; with --tenant it is taken for that tenant.
	r = o.run(t, "backfill", "--all", "--env", "staging", "--json")
	expect(t, r, 0, "")
	bs = decode(r)
	if len(bs) != 2 || bs[0].Name != "cli-org" || !bs[0].Skipped || bs[1].Name != "cli-every" || !bs[1].Run {
		t.Fatalf("--all without --tenant printed %q", r.stdout)
	}
	r = o.run(t, "backfill", "--all", "--env", "staging")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "cli-org: skipped: declared per tenant") || !strings.Contains(r.stdout, "cli-every: would run") {
		t.Fatalf("--all without --tenant printed\n%s", r.stdout)
	}
	r = o.run(t, "backfill", "--all", "--env", "staging", "--tenant", "org-b", "--json")
	expect(t, r, 0, "")
	if bs = decode(r); len(bs) != 2 {
		t.Fatalf("--all --tenant org-b printed %q", r.stdout)
	}
	for _, b := range bs {
		if !b.Run || b.Skipped || b.Tenant != map[string]string{"cli-every": "", "cli-org": "org-b"}[b.Name] {
			t.Fatalf("--all --tenant org-b printed %q", r.stdout)
		}
	}
	r = o.run(t, "backfill", "--all", "--env", "staging", "--tenant", "org-a", "--json")
	expect(t, r, 0, "")
	if bs = decode(r); len(bs) != 1 || bs[0].Name != "cli-every" {
		t.Fatalf("--all --tenant org-a (swept) printed %q", r.stdout)
	}

	// --write sweeps b's rows.
	r = o.run(t, "backfill", "cli-org", "--env", "staging", "--tenant", "org-b", "--write", "--json")
	expect(t, r, 0, "")
	if bs = decode(r); len(bs) != 1 || bs[0].RunID == "" || bs[0].Deduped {
		t.Fatalf("--write for org-b printed %q", r.stdout)
	}
	passB := bs[0].RunID
	if run := env.Await(passB, store.StateCompleted); run.Key != "cli-org/org-b" {
		t.Fatalf("org-b's pass has key %q", run.Key)
	}
	if done, of := tbl.swept("org-b"); done != of || of != 10 {
		t.Fatalf("org-b: %d of %d rows swept", done, of)
	}
	for i, n := range tbl.handled {
		if tbl.tenantOf(i) != "org-c" && n != 1 {
			t.Fatalf("row %d (%s) handled %d times", i, tbl.tenantOf(i), n)
		}
	}
	expect(t, o.run(t, "backfill", "cli-org", "--env", "staging", "--tenant", "org-b"), 1, "X_BACKFILL_APPLIED: ")

	// A live pass the application enqueued for a tenant is the one --write finds.
	live, err := org.Enqueue(ctx, env.Engine, backfill.Input{Tenant: "org-c"})
	if err != nil {
		t.Fatal(err)
	}
	r = o.run(t, "backfill", "cli-org", "--env", "staging", "--tenant", "org-c", "--write")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "cli-org (tenant org-c): a pass is already live: run "+live.RunID) {
		t.Fatalf("--write beside the application's live pass printed\n%s", r.stdout)
	}
	release()
	env.Await(live.RunID, store.StateCompleted)

	// --list: a TENANT column, and --tenant selects one tenant's passes.
	r = o.run(t, "backfill", "--list", "--name", "cli-org")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "TENANT") || !containsRow(r.stdout, "cli-org", "org-a", passA, "completed") ||
		!containsRow(r.stdout, "cli-org", "org-b", passB, "completed") {
		t.Fatalf("--list printed\n%s", r.stdout)
	}
	var list struct {
		Backfills []backfill.Progress `json:"backfills"`
	}
	r = o.run(t, "backfill", "--list", "--tenant", "org-b", "--json")
	expect(t, r, 0, "")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Backfills) != 1 ||
		list.Backfills[0].RunID != passB || list.Backfills[0].Tenant != "org-b" || list.Backfills[0].Rows != 10 {
		t.Fatalf("--list --tenant org-b printed %q (%v)", r.stdout, err)
	}

	// jobs show names the pass's tenant.
	r = o.run(t, "jobs", "show", passB)
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "backfill cli-org") || !strings.Contains(r.stdout, "tenant:  org-b") {
		t.Fatalf("jobs show printed\n%s", r.stdout)
	}
}

// containsRow reports whether a line of a table holds each of cells, as whole words, in order.
func containsRow(table string, cells ...string) bool {
	for _, l := range strings.Split(table, "\n") {
		fields := strings.Fields(l)
		i := 0
		for _, f := range fields {
			if i < len(cells) && f == cells[i] {
				i++
			}
		}
		if i == len(cells) {
			return true
		}
	}
	return false
}

// The ledger's table names a pass's tenant (escaped, as every cell) and `jobs show` its tenant;
// an ETA that cannot be estimated reads unknown, never 0s.
func TestBackfillTablesShowTheTenantAndAnUnknownETA(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	left := int64(7)
	p := backfill.Progress{BackfillRow: frontend.BackfillRow{Name: "bf", RunID: "r1", StartedAt: now, Total: 7},
		Tenant: "org\x1b[31m", Status: backfill.StatusRunning, Left: &left}
	var b bytes.Buffer
	if err := printBackfills(&b, now, []backfill.Progress{p}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "TENANT") || !containsRow(b.String(), "bf", `org\x1b[31m`, "r1", "running", "0", "0.0", "7", "unknown") {
		t.Fatalf("the ledger's table:\n%s", b.String())
	}
	b.Reset()
	if err := printRunBackfill(&b, &p); err != nil {
		t.Fatal(err)
	}
	if s := b.String(); !strings.Contains(s, `tenant:  org\x1b[31m`) || !strings.Contains(s, "left:    7 of 7 (ETA unknown)") ||
		strings.Contains(s, "0s") {
		t.Fatalf("jobs show's backfill section:\n%s", s)
	}
	b.Reset()
	none := int64(0)
	p.Tenant, p.Left, p.Rows = "", &none, 7
	if err := printRunBackfill(&b, &p); err != nil {
		t.Fatal(err)
	}
	if s := b.String(); !strings.Contains(s, "tenant:  - (a pass over every tenant)") || !strings.Contains(s, "left:    0 of 7\n") ||
		strings.Contains(s, "ETA") {
		t.Fatalf("jobs show's backfill section with nothing left:\n%s", s)
	}
	b.Reset()
	p.Left, p.ETA = &left, 90*time.Second
	if err := printRunBackfill(&b, &p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "(ETA 1m30s)") {
		t.Fatalf("jobs show's backfill section with an ETA:\n%s", b.String())
	}
}

// A backfill of every tenant is gated on its passes of no tenant, as the pass's own gate reads
// them (engine.BackfillOpen): here a backfill first declared per tenant, with org-a's pass
// completed, and then declared for every tenant. Its one pass over every tenant has not run, so
// the dry run would run it, as the pending report says; reading every pass of the name, it was
// refused X_BACKFILL_APPLIED on org-a's.
func TestBackfillDryRunOfEveryTenantReadsItsPassesOfNoTenant(t *testing.T) {
	t.Parallel()
	tbl := newOrgTable(6, "org-a", "org-b")
	org := backfill.MustDefine("cli-mode", backfill.PerTenant(), tbl.source(), tbl.handle, backfill.Rate(1e6),
		backfill.CountFor(tbl.left))
	var mu sync.Mutex
	decl := org.Declaration()
	provider := func(context.Context) ([]backfill.Declaration, error) {
		mu.Lock()
		defer mu.Unlock()
		return []backfill.Declaration{decl}, nil
	}
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}, Backfills: provider})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)
	env.Worker(worker.Config{PollWait: 100 * time.Millisecond}, org)
	o := &opsEnv{env: env, server: []string{"--server", ts.URL}}

	res, err := org.Enqueue(context.Background(), env.Engine, backfill.Input{Tenant: "org-a"})
	if err != nil {
		t.Fatal(err)
	}
	env.Await(res.RunID, store.StateCompleted)
	expect(t, o.run(t, "backfill", "cli-mode", "--tenant", "org-a"), 1, "X_BACKFILL_APPLIED: ")

	mu.Lock()
	decl.Tenant = "none"
	mu.Unlock()
	expect(t, o.run(t, "backfill", "--pending"), 1, "X_BACKFILL_PENDING: 1 unswept")
	r := o.run(t, "backfill", "cli-mode")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "cli-mode: would run") || strings.Contains(r.stdout, res.RunID) {
		t.Fatalf("the dry run of a backfill of every tenant printed\n%s", r.stdout)
	}
}
