package backfill_test

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/frontend"
)

func nopSource() backfill.Source[int] {
	return backfill.SourceFunc[int](func(context.Context, backfill.PageRequest) ([]int, backfill.Cursor, error) { return nil, nil, nil })
}

func nopHandle(context.Context, backfill.Batch[int]) error { return nil }

func TestDefineRefusesAtDeclaration(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		bname  string
		tenant backfill.Tenant
		opts   []backfill.Option
		code   jobs.Code
	}{
		{"empty name", "", backfill.AllTenants(), nil, jobs.CodeJobDefinition},
		{"no tenant", "x", backfill.Tenant{}, nil, jobs.CodeJobTenantRequired},
		{"batch 0", "x", backfill.AllTenants(), []backfill.Option{backfill.BatchSize(0)}, jobs.CodeJobDefinition},
		{"batch negative", "x", backfill.AllTenants(), []backfill.Option{backfill.BatchSize(-5)}, jobs.CodeJobDefinition},
		{"rate NaN", "x", backfill.AllTenants(), []backfill.Option{backfill.Rate(math.NaN())}, jobs.CodeJobDefinition},
		{"rate +Inf", "x", backfill.AllTenants(), []backfill.Option{backfill.Rate(math.Inf(1))}, jobs.CodeJobDefinition},
		{"rate -Inf", "x", backfill.AllTenants(), []backfill.Option{backfill.Rate(math.Inf(-1))}, jobs.CodeJobDefinition},
		{"rate 0", "x", backfill.AllTenants(), []backfill.Option{backfill.Rate(0)}, jobs.CodeJobDefinition},
		{"rate negative", "x", backfill.AllTenants(), []backfill.Option{backfill.Rate(-1)}, jobs.CodeJobDefinition},
		// A page in more than ~292 years: the interval overflows time.Duration (to a negative
		// one on amd64), and the pass would run unthrottled.
		{"rate 1e-11", "x", backfill.AllTenants(), []backfill.Option{backfill.Rate(1e-11)}, jobs.CodeJobDefinition},
		{"rate smallest positive", "x", backfill.AllTenants(), []backfill.Option{backfill.Rate(math.SmallestNonzeroFloat64)}, jobs.CodeJobDefinition},
		{"rate at the interval's limit", "x", backfill.AllTenants(), []backfill.Option{backfill.Rate(float64(time.Second) / float64(math.MaxInt64))}, jobs.CodeJobDefinition},
		{"empty environment", "x", backfill.AllTenants(), []backfill.Option{backfill.Environments("production", "")}, jobs.CodeJobDefinition},
		{"no environments", "x", backfill.AllTenants(), []backfill.Option{backfill.Environments()}, jobs.CodeJobDefinition},
		{"empty requires", "x", backfill.AllTenants(), []backfill.Option{backfill.Requires("")}, jobs.CodeJobDefinition},
		{"nil count", "x", backfill.AllTenants(), []backfill.Option{backfill.Count(nil)}, jobs.CodeJobDefinition},
	}
	for _, c := range cases {
		_, err := backfill.Define(c.bname, c.tenant, nopSource(), nopHandle, c.opts...)
		if !jobs.HasCode(err, c.code) {
			t.Errorf("%s: err = %v; want %s", c.name, err, c.code)
		}
	}
	if _, err := backfill.Define("x", backfill.AllTenants(), nil, nopHandle); !jobs.HasCode(err, jobs.CodeJobDefinition) {
		t.Errorf("nil source: %v", err)
	}
	b, err := backfill.Define("fractional", backfill.AllTenants(), nopSource(), nopHandle, backfill.Rate(0.5))
	if err != nil || b.Declaration().Rate != 0.5 || b.Declaration().Batch != backfill.DefaultBatch {
		t.Fatalf("a fractional rate: %v, %+v", err, b.Declaration())
	}
	// The lowest rate a pause can hold is taken: a page every ~290 years.
	if _, err := backfill.Define("glacial", backfill.AllTenants(), nopSource(), nopHandle, backfill.Rate(1.1e-10)); err != nil {
		t.Fatalf("a rate whose interval fits a time.Duration: %v", err)
	}
	d, _ := backfill.Define("defaults", backfill.AllTenants(), nopSource(), nopHandle)
	if d.Declaration().Rate != backfill.DefaultRate || d.Declaration().Batch != 1000 {
		t.Fatalf("defaults = %+v", d.Declaration())
	}
}

func TestIdempotencyKeyIsTheName(t *testing.T) {
	t.Parallel()
	b := backfill.MustDefine("keyed", backfill.AllTenants(), nopSource(), nopHandle)
	for _, in := range []backfill.Input{{}, {Force: true}} {
		req, err := b.Request(in)
		if err != nil || req.Key != "keyed" || !req.NoTenant {
			t.Fatalf("request(%+v) = %+v, %v; want key keyed, no tenant", in, req, err)
		}
	}
}

func TestDeclarationRoundTripsAndItsChecksumIgnoresTheRate(t *testing.T) {
	t.Parallel()
	def := func(opts ...backfill.Option) backfill.Declaration {
		return backfill.MustDefine("sum", backfill.AllTenants(), nopSource(), nopHandle,
			append([]backfill.Option{backfill.Requires("20260814120000"), backfill.Environments("staging", "production"),
				backfill.Count(func(context.Context) (int64, error) { return 0, nil })}, opts...)...).Declaration()
	}
	d := def()
	if d.Kind != "backfill" || d.Name != "sum" || d.Requires != "20260814120000" || !d.HasCount ||
		!reflect.DeepEqual(d.Environments, []string{"staging", "production"}) || d.Checksum == "" {
		t.Fatalf("declaration = %+v", d)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back backfill.Declaration
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, d) || back.Sum() != d.Checksum {
		t.Fatalf("round trip = %+v, %v; want %+v", back, err, d)
	}
	if def(backfill.Rate(200)).Checksum != d.Checksum {
		t.Error("the rate moved the checksum")
	}
	for name, other := range map[string]backfill.Declaration{
		"batch":    def(backfill.BatchSize(10)),
		"version":  def(backfill.Version("2")),
		"requires": def(backfill.Requires("1")),
	} {
		if other.Checksum == d.Checksum {
			t.Errorf("a different %s kept the checksum", name)
		}
	}
	// The order environments are listed in is not a different definition.
	swapped := backfill.MustDefine("sum", backfill.AllTenants(), nopSource(), nopHandle, backfill.Requires("20260814120000"),
		backfill.Environments("production", "staging"), backfill.Count(func(context.Context) (int64, error) { return 0, nil })).Declaration()
	if swapped.Checksum != d.Checksum {
		t.Error("the environments' order moved the checksum")
	}
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	b := backfill.MustDefine("registered-one", backfill.AllTenants(), nopSource(), nopHandle)
	found := false
	for _, d := range backfill.Registered() {
		if d.Name == "registered-one" {
			found = d.Checksum == b.Declaration().Checksum
		}
	}
	if !found {
		t.Fatal("a defined backfill is not registered")
	}
	plain := jobs.MustDefine("plain", func(int) string { return "k" }, jobs.NoTenant[int](),
		func(*jobs.Ctx, int) (int, error) { return 0, nil })
	if !backfill.Is(b) || backfill.Is(plain) {
		t.Fatal("Is: a backfill is one, a plain job is not")
	}
	reg, err := jobs.NewRegistry(b, plain)
	if err != nil {
		t.Fatal(err)
	}
	if ds := backfill.InRegistry(reg); len(ds) != 1 || ds[0].Name != "registered-one" {
		t.Fatalf("InRegistry = %+v", ds)
	}
}

func progress(name, runID, status string, started time.Time) backfill.Progress {
	return backfill.NewProgress(frontend.BackfillRow{Name: name, RunID: runID, Status: status, Checksum: "c-" + name,
		Total: -1, StartedAt: started, UpdatedAt: started, CompletedAt: started}, "")
}

func TestGateOrder(t *testing.T) {
	t.Parallel()
	d := backfill.Declaration{Name: "g", Requires: "7", Environments: []string{"production"}}
	done := progress("g", "run-1", backfill.StatusCompleted, time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC))
	cases := []struct {
		name string
		in   backfill.GateInput
		code jobs.Code
	}{
		// Every rail fails here: the environment is reported first.
		{"environment first", backfill.GateInput{Declaration: d, Environment: "staging", Migration: backfill.MigrationPending, Completed: &done}, jobs.CodeBackfillEnvironment},
		{"then the migration", backfill.GateInput{Declaration: d, Environment: "production", Migration: backfill.MigrationPending, Completed: &done}, jobs.CodeBackfillMigrationPending},
		{"then completed", backfill.GateInput{Declaration: d, Environment: "production", Migration: backfill.MigrationApplied, Completed: &done}, jobs.CodeBackfillApplied},
		{"an unreadable ledger is no refusal", backfill.GateInput{Declaration: d, Environment: "production", Migration: backfill.MigrationUnknown}, ""},
		{"force passes completed", backfill.GateInput{Declaration: d, Environment: "production", Migration: backfill.MigrationApplied, Completed: &done, Force: true}, ""},
		{"no environments is every one", backfill.GateInput{Declaration: backfill.Declaration{Name: "g"}, Environment: "anything"}, ""},
	}
	for _, c := range cases {
		v := backfill.Gate(c.in)
		if c.code == "" {
			if !v.Run() {
				t.Errorf("%s: refused with %v", c.name, v.Err)
			}
			continue
		}
		if v.Run() || v.Err.Code != c.code {
			t.Errorf("%s: verdict %v; want %s", c.name, v.Err, c.code)
		}
	}
	if v := backfill.Gate(cases[2].in); v.Err == nil || !contains(v.Err.Message, "run-1") {
		t.Errorf("the applied verdict does not name the completed run: %v", v.Err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestPendingStates(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	decls := []backfill.Declaration{
		{Name: "never-run", Checksum: "c-never-run"},
		{Name: "failed", Checksum: "c-failed"},
		{Name: "running", Checksum: "c-running"},
		{Name: "done", Checksum: "c-done"},
		{Name: "done-then-failed", Checksum: "c-done-then-failed"},
		{Name: "prod-only", Checksum: "c-prod-only", Environments: []string{"production"}},
		{Name: "moved", Checksum: "new"},
	}
	ledgerRows := []backfill.Progress{ // newest first
		progress("done-then-failed", "r6", backfill.StatusFailed, at.Add(6*time.Hour)),
		progress("moved", "r5", backfill.StatusCompleted, at.Add(5*time.Hour)),
		progress("running", "r4", backfill.StatusRunning, at.Add(4*time.Hour)),
		progress("failed", "r3", backfill.StatusFailed, at.Add(3*time.Hour)),
		progress("done", "r2", backfill.StatusCompleted, at.Add(2*time.Hour)),
		progress("done-then-failed", "r1", backfill.StatusCompleted, at.Add(time.Hour)),
		progress("gone", "r0", backfill.StatusCompleted, at),
	}
	rep := backfill.Pending(decls, ledgerRows, "staging")
	want := map[string]string{"never-run": "pending", "failed": "failed", "running": "running", "done": "completed",
		"done-then-failed": "completed", "prod-only": "excluded", "moved": "completed"}
	for _, r := range rep.Rows {
		if want[r.Name] != r.State {
			t.Errorf("%s: state %s; want %s", r.Name, r.State, want[r.Name])
		}
		if r.Name == "moved" && r.LedgerChecksum != "c-moved" {
			t.Errorf("moved: ledger checksum %q; want the pass's", r.LedgerChecksum)
		}
	}
	if len(rep.Rows) != len(decls) {
		t.Fatalf("rows = %d; want %d", len(rep.Rows), len(decls))
	}
	if !reflect.DeepEqual(rep.Pending, []string{"failed", "never-run"}) || !rep.Unswept() {
		t.Fatalf("pending = %v; want failed and never-run", rep.Pending)
	}
	if !reflect.DeepEqual(rep.Orphaned, []string{"gone"}) {
		t.Fatalf("orphaned = %v", rep.Orphaned)
	}
	if backfill.Pending(decls[2:4], ledgerRows, "staging").Unswept() {
		t.Fatal("running and completed are not unswept")
	}
	if rep := backfill.Pending(decls[5:6], nil, "production"); rep.Rows[0].State != "pending" {
		t.Fatalf("prod-only in production: %s", rep.Rows[0].State)
	}
}

func TestProgressProjection(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	row := frontend.BackfillRow{Name: "p", Status: "running", Rows: 500, Total: 2000, StartedAt: start, UpdatedAt: start.Add(10 * time.Second)}
	p := backfill.NewProgress(row, "running")
	if p.RowsPerSecond != 50 || p.Left == nil || *p.Left != 1500 || p.ETA != 30*time.Second {
		t.Fatalf("progress = %+v; want 50 rows/s, 1500 left, ETA 30s", p)
	}
	for state, want := range map[string]string{"cancelled": "failed", "failed": "failed", "blocked": "failed", "completed": "completed", "delayed": "running", "": "running"} {
		if got := backfill.NewProgress(row, state).Status; got != want {
			t.Errorf("a running row of a %q run reads %s; want %s", state, got, want)
		}
	}
	row.Total = -1
	if p := backfill.NewProgress(row, ""); p.Left != nil || p.ETA != 0 {
		t.Fatalf("without a count: %+v", p)
	}
	// A running row whose run is gone (retention deleted it) can never end: it reads failed.
	row.Total = 2000
	if p := backfill.NewProgress(row, backfill.RunDeleted); p.Status != backfill.StatusFailed || p.Error == "" || p.Left != nil {
		t.Fatalf("a running row of a deleted run = %+v; want failed, saying why", p)
	}
}

// The ETA is zero when it cannot be estimated (no row done yet: no rate) and never overflows: a
// pass so slow that its rows left outlast a time.Duration read MaxETA, where the conversion
// wrapped to a negative duration. A fraction of a second left is a second, not an unknown 0.
func TestETAIsClampedAndUnknownWithoutARate(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		rows, total int64
		elapsed     time.Duration
		want        time.Duration
	}{
		{1, 1 << 40, time.Second, backfill.MaxETA},
		{1000, 1e12, 10 * time.Minute, backfill.MaxETA},
		{1, 9e18, time.Hour, backfill.MaxETA},
		{0, 100, time.Hour, 0},             // no row done: no rate, unknown
		{5, 3, time.Second, 0},             // nothing left
		{10, 12, time.Second, time.Second}, // 0.2 s left
		{500, 2000, 10 * time.Second, 30 * time.Second},
	} {
		p := backfill.NewProgress(frontend.BackfillRow{Status: "running", Rows: c.rows, Total: c.total, StartedAt: start,
			UpdatedAt: start.Add(c.elapsed)}, "running")
		if p.ETA != c.want || p.ETA < 0 || p.Left == nil {
			t.Errorf("%d of %d rows in %s: ETA %v (left %v); want %v", c.rows, c.total, c.elapsed, p.ETA, p.Left, c.want)
		}
	}
	if backfill.MaxETA <= 0 || backfill.MaxETA%time.Second != 0 {
		t.Fatalf("MaxETA = %d", backfill.MaxETA)
	}
}

func TestParseCount(t *testing.T) {
	t.Parallel()
	for _, v := range []any{int64(3), 3, int32(3), int16(3), int8(3), uint(3), uint64(3), uint32(3), uint16(3), uint8(3),
		float64(3), float32(3), []byte("3"), "3"} {
		if n, err := backfill.ParseCount(v); err != nil || n != 3 {
			t.Errorf("ParseCount(%#v) = %d, %v", v, n, err)
		}
	}
	// An integer type carries its value exactly: a uint64 is read up to MaxInt64, as an int64 is
	// (only a float64 stops at 2^53, past which it holds no integer exactly).
	for _, v := range []any{uint64(1 << 60), int64(1 << 60), uint64(math.MaxInt64), uint(math.MaxInt64)} {
		if n, err := backfill.ParseCount(v); err != nil || uint64(n) != reflect.ValueOf(v).Convert(reflect.TypeFor[uint64]()).Uint() {
			t.Errorf("ParseCount(%T %v) = %d, %v", v, v, n, err)
		}
	}
	for _, v := range []any{int64(-1), math.NaN(), 1.5, -2.0, math.Inf(1), "x", []byte("1.5"), nil, true,
		uint64(math.MaxInt64) + 1, uint(math.MaxUint), float64(1 << 60)} {
		if _, err := backfill.ParseCount(v); !jobs.HasCode(err, jobs.CodeInvariant) {
			t.Errorf("ParseCount(%#v) = %v; want X_INVARIANT", v, err)
		}
	}
}
