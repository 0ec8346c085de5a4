package sqlite

// These tests hold what store/storetest cannot see: the schema's migrations, the connection
// settings, the exact storage of times and payloads, and the rules that must hold between two
// Stores (two processes) sharing one file, where the one write connection of a Store no longer
// serialises everything and SQLite's own lock must.

import (
	"context"
	"database/sql"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	jobs "github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/storetest"
)

var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func openAt(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), Config{Path: path, Clock: clock.NewFake(base)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jobs.db")
	return openAt(t, path), path
}

func newRunParams(n int, queue string) store.CreateRunParams {
	r := store.Run{ID: fmt.Sprintf("run-%04d", n), Job: "job", Queue: queue, Key: fmt.Sprintf("key-%d", n),
		Input: []byte("in"), State: store.StateReady, Attempt: 1, ReadyAt: base, CreatedAt: base}
	return store.CreateRunParams{Run: r, Started: history.New(base, history.RunStarted{Job: "job", Queue: queue})}
}

func mustCreate(t *testing.T, s store.Store, ps ...store.CreateRunParams) {
	t.Helper()
	if _, err := s.RunCreate(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
}

func ledger(t *testing.T, db *sql.DB) map[int]string {
	t.Helper()
	rows, err := db.Query(`SELECT version, name FROM schema_migrations`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int]string{}
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			t.Fatal(err)
		}
		out[v] = name
	}
	return out
}

// ---- migrations ----

func TestOpenCreatesTheSchemaAndReopens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested", "dir", "jobs.db") // the directory is created
	s, err := Open(t.Context(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	want, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	if got := ledger(t, s.w); len(got) != len(want) || got[1] != "init" {
		t.Errorf("ledger %v after the first open, want every one of the %d migrations", got, len(want))
	}
	mustCreate(t, s, newRunParams(1, "q"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// An existing file opens again: nothing is applied twice (001 would fail on CREATE TABLE),
	// and the data is still there.
	s = openAt(t, path)
	if got := ledger(t, s.w); len(got) != len(want) {
		t.Errorf("ledger %v after reopening", got)
	}
	if _, err := s.RunGet(t.Context(), "run-0001"); err != nil {
		t.Errorf("the run created before reopening: %v", err)
	}
}

// testMigrations is a schema history of three versions, each failing if run twice.
var testMigrations = fstest.MapFS{
	"migrations/001_one.sql":   {Data: []byte(`CREATE TABLE one (x INTEGER);`)},
	"migrations/002_two.sql":   {Data: []byte(`CREATE TABLE two (x INTEGER); INSERT INTO two VALUES (2);`)},
	"migrations/003_three.sql": {Data: []byte(`ALTER TABLE two ADD COLUMN y TEXT NOT NULL DEFAULT 'y';`)},
}

func rawDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(filepath.Join(t.TempDir(), "m.db")))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func TestMigrateAppliesOnlyTheLaterOnes(t *testing.T) {
	db := rawDB(t)
	// A file at version 1, as an older build left it.
	for _, q := range []string{sqlLedgerCreate, `CREATE TABLE one (x INTEGER)`,
		`INSERT INTO schema_migrations VALUES (1, 'one', 0)`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := migrate(t.Context(), db, testMigrations, base); err != nil {
		t.Fatalf("migrate from version 1: %v", err)
	}
	if got := ledger(t, db); len(got) != 3 || got[2] != "two" || got[3] != "three" {
		t.Errorf("ledger %v, want versions 1 to 3", got)
	}
	var y string
	if err := db.QueryRow(`SELECT y FROM two`).Scan(&y); err != nil || y != "y" {
		t.Errorf("migrations 2 and 3 did not both run: %q, %v", y, err)
	}
	var at int64
	if err := db.QueryRow(`SELECT applied_at FROM schema_migrations WHERE version = 3`).Scan(&at); err != nil || at != base.UnixNano() {
		t.Errorf("applied_at = %d, %v; want the clock's %d", at, err, base.UnixNano())
	}
	// Up to date: a second run applies nothing (002 would fail on CREATE TABLE).
	if err := migrate(t.Context(), db, testMigrations, base); err != nil {
		t.Errorf("migrate an up-to-date file: %v", err)
	}
}

func TestMigrateIsOneTransaction(t *testing.T) {
	db := rawDB(t)
	broken := fstest.MapFS{
		"migrations/001_one.sql": testMigrations["migrations/001_one.sql"],
		"migrations/002_bad.sql": {Data: []byte(`CREATE TABLE nope (x INTEGER); SELECT * FROM missing;`)},
	}
	if err := migrate(t.Context(), db, broken, base); err == nil {
		t.Fatal("a failing migration did not fail migrate")
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name IN ('one', 'nope', 'schema_migrations')`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d tables left by a failed migrate (%v), want none: all or nothing", n, err)
	}
}

func TestMigrateRefusesANewerFile(t *testing.T) {
	db := rawDB(t)
	if err := migrate(t.Context(), db, testMigrations, base); err != nil {
		t.Fatal(err)
	}
	older := fstest.MapFS{"migrations/001_one.sql": testMigrations["migrations/001_one.sql"]}
	err := migrate(t.Context(), db, older, base)
	if jobs.CodeOf(err) != jobs.CodeDriverUnavailable {
		t.Errorf("an older build on a newer file: %v, want X_DRIVER_UNAVAILABLE", err)
	}
}

func TestLoadMigrationsRefusesGapsAndBadNames(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"gap": {"migrations/001_a.sql": {}, "migrations/003_c.sql": {}},
		"dup": {"migrations/001_a.sql": {}, "migrations/001_b.sql": {}},
		"bad": {"migrations/1_a.sql": {}},
	} {
		if _, err := loadMigrations(fsys); err == nil {
			t.Errorf("%s: loadMigrations accepted %v", name, fsys)
		}
	}
	if _, err := loadMigrations(migrationFiles); err != nil {
		t.Errorf("the embedded migrations: %v", err)
	}
}

// ---- connection settings ----

func TestConnectionSettings(t *testing.T) {
	for _, tc := range []struct {
		sync Synchronous
		want int // PRAGMA synchronous's number
	}{{"", 2}, {SynchronousFull, 2}, {SynchronousNormal, 1}} {
		t.Run(string(tc.sync), func(t *testing.T) {
			s, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "jobs.db"), Synchronous: tc.sync})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var mode string
			var syncN, fk, busy int
			if err := s.w.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
				t.Errorf("journal_mode %q, %v; want wal", mode, err)
			}
			if err := s.w.QueryRow(`PRAGMA synchronous`).Scan(&syncN); err != nil || syncN != tc.want {
				t.Errorf("synchronous %d, %v; want %d", syncN, err, tc.want)
			}
			if err := s.w.QueryRow(`PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
				t.Errorf("foreign_keys %d, %v; want 1", fk, err)
			}
			if err := s.w.QueryRow(`PRAGMA busy_timeout`).Scan(&busy); err != nil || busy != 5000 {
				t.Errorf("busy_timeout %d, %v; want 5000", busy, err)
			}
			if s.w.Stats().MaxOpenConnections != 1 {
				t.Errorf("the write pool allows %d connections, want 1", s.w.Stats().MaxOpenConnections)
			}
			if _, err := s.r.Exec(`CREATE TABLE x (y INTEGER)`); err == nil {
				t.Error("the read pool wrote")
			}
		})
	}
}

func TestConfigRefusals(t *testing.T) {
	dir := t.TempDir()
	for name, cfg := range map[string]Config{
		"no path":     {},
		"memory":      {Path: ":memory:"},
		"uri":         {Path: "file:x.db"},
		"synchronous": {Path: filepath.Join(dir, "a.db"), Synchronous: "OFF"},
		"busy":        {Path: filepath.Join(dir, "b.db"), BusyTimeout: -time.Second},
		"reads":       {Path: filepath.Join(dir, "c.db"), ReadConns: -1},
	} {
		if s, err := Open(t.Context(), cfg); jobs.CodeOf(err) != jobs.CodeBadRequest {
			t.Errorf("%s: Open = %v, want X_BAD_REQUEST", name, err)
			if s != nil {
				s.Close()
			}
		}
	}
}

func TestPathWithURICharacters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a?b#c%d", "jobs.db")
	s := openAt(t, path)
	mustCreate(t, s, newRunParams(1, "q"))
	var file string
	if err := s.w.QueryRow(`SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&file); err != nil || file != path {
		t.Errorf("database file %q, %v; want %q", file, err, path)
	}
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	s, _ := openTemp(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RunGet(t.Context(), "x"); jobs.CodeOf(err) != jobs.CodeStoreUnavailable {
		t.Errorf("RunGet after Close: %v", err)
	}
	if _, err := s.RunCreate(t.Context(), []store.CreateRunParams{newRunParams(1, "q")}); jobs.CodeOf(err) != jobs.CodeStoreUnavailable {
		t.Errorf("RunCreate after Close: %v", err)
	}
}

// ---- storage of values ----

func TestTimesAndBlobsRoundTrip(t *testing.T) {
	for _, tm := range []time.Time{{}, base, time.Unix(0, 0), base.Add(123456789 * time.Nanosecond),
		time.Date(2026, 1, 1, 9, 0, 0, 1, time.FixedZone("x", 3600))} {
		if got := decTime(encTime(tm)); !got.Equal(tm) || got.IsZero() != tm.IsZero() {
			t.Errorf("time %v came back %v", tm, got)
		}
	}
	// Beyond int64 nanoseconds, times saturate: "never" stays after every real time.
	if got := decTime(encTime(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))); got.Year() != 2262 {
		t.Errorf("year 9999 stored as %v, want the last storable instant", got)
	}

	s, _ := openTemp(t)
	empty := newRunParams(1, "q")
	empty.Run.Input = []byte{}
	null := newRunParams(2, "q")
	null.Run.Input = nil
	mustCreate(t, s, empty, null)
	for id, wantNil := range map[string]bool{"run-0001": false, "run-0002": true} {
		r, err := s.RunGet(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if (r.Input == nil) != wantNil || len(r.Input) != 0 {
			t.Errorf("%s: Input %#v, want nil=%v", id, r.Input, wantNil)
		}
	}
}

// ---- rules between two stores on one file (two processes) ----

// twoStores opens the same file twice: each has its own write connection, so only SQLite's lock
// (BEGIN IMMEDIATE, busy_timeout) keeps their transactions apart. Open refuses a second engine
// on a file (lock.go); these tests keep the store's own rules honest should the lock ever be
// bypassed (a non-unix build, a file copied under another name), so the second skips it.
func twoStores(t *testing.T) (*Store, *Store) {
	t.Helper()
	a, path := openTemp(t)
	b, err := Open(t.Context(), Config{Path: path, Clock: clock.NewFake(base), unlocked: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return a, b
}

func TestTwoStoresFireEachTimerOnce(t *testing.T) {
	a, b := twoStores(t)
	const runs = 60
	due := base.Add(time.Hour)
	var ps []store.CreateRunParams
	for i := range runs {
		p := newRunParams(i, "q")
		p.Run.State = store.StateDelayed
		p.Timer = &store.Timer{Key: "delay", DueAt: due}
		ps = append(ps, p)
	}
	mustCreate(t, a, ps...)

	fired := storetest.FireConcurrently(t, due, 3, a, b, a, b)
	if len(fired) != runs {
		t.Errorf("%d runs woken, want %d", len(fired), runs)
	}
	for id, n := range fired {
		if n != 1 {
			t.Errorf("run %s woken %d times", id, n)
		}
	}
}

func TestTwoStoresClaimEachRunOnce(t *testing.T) {
	a, b := twoStores(t)
	const runs = 100
	var ps []store.CreateRunParams
	for i := range runs {
		ps = append(ps, newRunParams(i, "q"))
	}
	mustCreate(t, a, ps...)
	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	for i, s := range []*Store{a, b, a, b} {
		wg.Go(func() {
			for {
				rs, err := s.RunClaim(t.Context(), store.ClaimParams{WorkerID: fmt.Sprint("w", i), Queues: []string{"q"},
					Limit: 4, Now: base, LeaseUntil: base.Add(time.Minute), StickyBefore: base})
				if err != nil {
					t.Errorf("RunClaim: %v", err)
					return
				}
				if len(rs) == 0 {
					return
				}
				mu.Lock()
				for _, r := range rs {
					claimed[r.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(claimed) != runs {
		t.Errorf("%d runs claimed, want %d", len(claimed), runs)
	}
	for id, n := range claimed {
		if n != 1 {
			t.Errorf("run %s claimed %d times", id, n)
		}
	}
}

func TestTwoStoresCreateOneRunPerKey(t *testing.T) {
	a, b := twoStores(t)
	var wg sync.WaitGroup
	results := make([]store.CreateRunResult, 16)
	for i := range results {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			p := newRunParams(i, "q")
			p.Run.Key = "same"
			res, err := s.RunCreate(t.Context(), []store.CreateRunParams{p})
			if err != nil {
				t.Errorf("RunCreate: %v", err)
				return
			}
			results[i] = res[0]
		})
	}
	wg.Wait()
	created := 0
	for _, r := range results {
		if !r.Deduped {
			created++
		}
		if r.Run.ID != results[0].Run.ID {
			t.Errorf("creates returned runs %s and %s", r.Run.ID, results[0].Run.ID)
		}
	}
	if created != 1 {
		t.Errorf("%d runs created for one key, want 1", created)
	}
}

// An event published by one store while the other registers a matching wait reaches the run
// exactly once: either the publish finds the wait or the wait's lookback finds the event.
func TestTwoStoresPublishRacingAWait(t *testing.T) {
	for round := range 20 {
		a, b := twoStores(t)
		mustCreate(t, a, newRunParams(1, "q"))
		rs, err := a.RunClaim(t.Context(), store.ClaimParams{WorkerID: "w", Queues: []string{"q"}, Limit: 1,
			Now: base, LeaseUntil: base.Add(time.Minute), StickyBefore: base})
		if err != nil || len(rs) != 1 {
			t.Fatal(rs, err)
		}
		r := rs[0]
		var wg sync.WaitGroup
		var applied store.MutationResult
		var pub store.PublishResult
		wg.Go(func() {
			res, err := a.RunApply(t.Context(), []store.Mutation{{RunID: r.ID, Fence: r.Fence, Now: base,
				Transition: store.Transition{State: store.StateSuspended,
					Wait: &store.Wait{Name: "w", Event: "paid", LookbackFrom: base.Add(-time.Minute)}}}})
			if err != nil {
				t.Errorf("RunApply: %v", err)
				return
			}
			applied = res[0]
		})
		wg.Go(func() {
			var err error
			pub, err = b.RunPublish(t.Context(), store.PublishParams{ID: "ev", Name: "paid", Now: base})
			if err != nil {
				t.Errorf("RunPublish: %v", err)
			}
		})
		wg.Wait()
		evs, err := a.HistoryRead(t.Context(), r.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs {
			if e.Kind == history.KindEventReceived {
				n++
			}
		}
		viaLookback := applied.Run.State == store.StateRunning
		if n != 1 || viaLookback == (len(pub.Delivered) == 1) {
			t.Fatalf("round %d: %d EventReceived; lookback %v, publish delivered %v", round, n, viaLookback, pub.Delivered)
		}
	}
}

// ---- the batch is one transaction ----

func TestApplyFailureCommitsNothing(t *testing.T) {
	s, _ := openTemp(t)
	mustCreate(t, s, newRunParams(1, "q"))
	rs, err := s.RunClaim(t.Context(), store.ClaimParams{WorkerID: "w", Queues: []string{"q"}, Limit: 1,
		Now: base, LeaseUntil: base.Add(time.Minute), StickyBefore: base})
	if err != nil || len(rs) != 1 {
		t.Fatal(rs, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	step := history.New(base, history.StepCompleted{StepName: "a"})
	if _, err := s.RunApply(ctx, []store.Mutation{{RunID: rs[0].ID, Fence: rs[0].Fence, Now: base,
		Events: []history.Event{step}}}); jobs.CodeOf(err) != jobs.CodeStoreUnavailable {
		t.Errorf("RunApply with a cancelled context: %v, want X_STORE_UNAVAILABLE", err)
	}
	if r, _ := s.RunGet(t.Context(), rs[0].ID); r.LastSeq != 1 {
		t.Errorf("LastSeq %d after a failed call, want 1", r.LastSeq)
	}
}

// TestWriteStatementsArePrepared checks that every statement a write transaction runs is in
// writeStatements. A missing one still works (prepared inside the transaction), so no other
// test would notice; it would only be parsed again on every call.
func TestWriteStatementsArePrepared(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	used, listed := map[string]bool{}, map[string]bool{}
	for _, f := range pkgs["sqlite"].Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || len(n.Args) == 0 {
					return true
				}
				recv, ok := sel.X.(*ast.Ident)
				if !ok || recv.Name != "t" || (sel.Sel.Name != "exec" && sel.Sel.Name != "query" && sel.Sel.Name != "queryRow") {
					return true
				}
				if id, ok := n.Args[0].(*ast.Ident); ok {
					used[id.Name] = true
				}
			case *ast.AssignStmt:
				// writeStatements = append(writeStatements, …), from a sql_<topic>.go's init.
				if lhs, ok := n.Lhs[0].(*ast.Ident); ok && lhs.Name == "writeStatements" {
					if call, ok := n.Rhs[0].(*ast.CallExpr); ok {
						for _, e := range call.Args[1:] {
							if id, ok := e.(*ast.Ident); ok {
								listed[id.Name] = true
							}
						}
					}
				}
			case *ast.ValueSpec:
				if len(n.Names) == 1 && n.Names[0].Name == "writeStatements" {
					for _, e := range n.Values[0].(*ast.CompositeLit).Elts {
						listed[e.(*ast.Ident).Name] = true
					}
				}
			}
			return true
		})
	}
	if len(used) == 0 || len(listed) == 0 {
		t.Fatalf("found %d statements used and %d listed: the test no longer reads the code", len(used), len(listed))
	}
	for name := range used {
		if !listed[name] {
			t.Errorf("%s runs in a write transaction but is not in writeStatements", name)
		}
	}
}

// The timer service asks for lapsed leases after every round, which is many times a second while
// timers fall due; with none lapsed the answer must not take a turn of the one write connection,
// which the woken runs' claims and records queue for.
func TestExpireLeasesWithNoneLapsedTakesNoWriterTurn(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	before := s.writes.Load()
	woken, err := s.RunExpireLeases(ctx, base, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(woken) != 0 {
		t.Fatalf("expired %v in an empty store", woken)
	}
	if n := s.writes.Load() - before; n != 0 {
		t.Fatalf("RunExpireLeases with no lapsed lease began %d write transactions, want 0", n)
	}
}

// At section 6's rate every wake-up is a claimed run, a fired timer and a finished run on the one
// write connection, so the statements each costs the writer are pinned here (bench/ANALYSIS.md,
// "Less writer work per wake-up").

// statementsOf counts the write statements fn runs.
func statementsOf(t *testing.T, s *Store, fn func()) int64 {
	t.Helper()
	before := s.statements.Load()
	fn()
	return s.statements.Load() - before
}

// A claim updates its runs in one statement, however many it claims, and hands them back in
// claim order.
func TestClaimIsOneStatementForItsRuns(t *testing.T) {
	s, _ := openTemp(t)
	ctx := t.Context()
	var ps []store.CreateRunParams
	for i := range 12 {
		p := newRunParams(i, "q")
		// Ready in the reverse of id order, so an order that follows the rows' order fails.
		p.Run.ReadyAt = base.Add(-time.Duration(i) * time.Second)
		ps = append(ps, p)
	}
	mustCreate(t, s, ps...)
	claim := func(limit int, oldestFirst bool) []store.Run {
		rs, err := s.RunClaim(ctx, store.ClaimParams{WorkerID: "w", Queues: []string{"q"}, Limit: limit,
			OldestFirst: oldestFirst, Now: base, LeaseUntil: base.Add(time.Minute), StickyBefore: base})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != limit {
			t.Fatalf("claimed %d runs, want %d", len(rs), limit)
		}
		for i := 1; i < len(rs); i++ {
			if !rs[i-1].ReadyAt.Before(rs[i].ReadyAt) {
				t.Fatalf("claimed out of order: %s (ready %s) before %s (ready %s)", rs[i-1].ID, rs[i-1].ReadyAt, rs[i].ID, rs[i].ReadyAt)
			}
		}
		for _, r := range rs {
			if r.State != store.StateRunning || r.WorkerID != "w" || r.Fence != 1 {
				t.Fatalf("claimed run %s is %s, worker %q, fence %d", r.ID, r.State, r.WorkerID, r.Fence)
			}
		}
		return rs
	}
	for _, oldestFirst := range []bool{false, true} {
		two := statementsOf(t, s, func() { claim(2, oldestFirst) })
		four := statementsOf(t, s, func() { claim(4, oldestFirst) })
		if four != two {
			t.Errorf("oldestFirst=%v: a claim of 4 runs ran %d statements, a claim of 2 ran %d: want the same", oldestFirst, four, two)
		}
	}
}

// A timer's fire deletes the run's waits only when it has some: a sleep's wake-up runs the due
// read, the delete of its timers and the run's update, and no delete that finds nothing.
func TestTimerFireOfASleepDeletesNoWaits(t *testing.T) {
	s, _ := openTemp(t)
	due := base.Add(time.Hour)
	p := newRunParams(1, "q")
	p.Run.State = store.StateDelayed
	p.Timer = &store.Timer{Key: "delay", DueAt: due}
	mustCreate(t, s, p)
	var woken []store.Woken
	n := statementsOf(t, s, func() {
		var err error
		if woken, err = s.TimerFire(t.Context(), due, 0); err != nil {
			t.Fatal(err)
		}
	})
	if len(woken) != 1 {
		t.Fatalf("woke %v, want the one run", woken)
	}
	// The batch's read, the timers' delete, the wake-up; no read after a batch that read fewer
	// timers than it asked for (it read every one due).
	if n != 3 {
		t.Errorf("a fire of one timer ran %d statements, want 3", n)
	}
}

// A mutation that finishes a run with no timer and no wait runs its read, its event's append and
// the run's update; one with a timer left still removes it.
func TestFinishDeletesOnlyWhatTheRunHas(t *testing.T) {
	s, _ := openTemp(t)
	ctx := t.Context()
	mustCreate(t, s, newRunParams(1, "q"), newRunParams(2, "q"))
	rs, err := s.RunClaim(ctx, store.ClaimParams{WorkerID: "w", Queues: []string{"q"}, Limit: 2, OldestFirst: true,
		Now: base, LeaseUntil: base.Add(time.Hour), StickyBefore: base})
	if err != nil || len(rs) != 2 {
		t.Fatalf("claim: %v, %v", rs, err)
	}
	// Run 2 arms a timer on a step, then both finish.
	if res, err := s.RunApply(ctx, []store.Mutation{{RunID: rs[1].ID, Fence: rs[1].Fence, Now: base,
		Transition: store.Transition{Timers: []store.Timer{{Key: "t", DueAt: base.Add(time.Hour)}}}}}); err != nil || res[0].Err != nil {
		t.Fatalf("arm: %v, %v", res, err)
	}
	finish := func(r store.Run) {
		res, err := s.RunApply(ctx, []store.Mutation{{RunID: r.ID, Fence: r.Fence, Now: base,
			Events:     []history.Event{history.New(base, history.RunCompleted{})},
			Transition: store.Transition{State: store.StateCompleted}}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("finish: %v, %v", res, err)
		}
	}
	if n := statementsOf(t, s, func() { finish(rs[0]) }); n != 3 {
		t.Errorf("finishing a run with no timer and no wait ran %d statements, want 3", n)
	}
	finish(rs[1])
	if _, ok, err := s.TimerNext(ctx); err != nil || ok {
		t.Errorf("a finished run's timer is left: %v, %v", ok, err)
	}
}
