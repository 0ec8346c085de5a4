package backfill_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/backfill/keyset"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// The crash test's worker runs in a child process (this test binary, with BACKFILL_CRASH_CHILD
// set) and reaches the engine, which stays in the test's process over each store, through the
// HTTP API. Killing the child with SIGKILL mid-page leaves the run's lease to lapse; a second
// child claims the run and resumes the pass.

const (
	crashRows  = 60
	crashBatch = 5
)

func TestMain(m *testing.M) {
	if os.Getenv("BACKFILL_CRASH_CHILD") != "" {
		crashChild()
		return
	}
	os.Exit(m.Run())
}

type post struct {
	ID    int64
	Title string
}

func openApp(path string) (*sql.DB, error) {
	return sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
}

// crashBackfill sweeps the posts without a slug, writing each page's effect (fsynced) before its
// rows, then lingering so a kill lands while the page is in flight. overlap declares
// OverlapCheckpoints.
func crashBackfill(db *sql.DB, effects string, overlap bool) *backfill.Backfill[post] {
	opts := []backfill.Option{backfill.BatchSize(crashBatch), backfill.Rate(1000),
		backfill.Count(keyset.CountSQL(db, `SELECT count(*) FROM posts WHERE slug IS NULL`))}
	if overlap {
		opts = append(opts, backfill.OverlapCheckpoints())
	}
	src := keyset.SQL(db, keyset.Query{Table: "posts", Columns: []string{"id", "title"}, Keys: []string{"id"}, Where: "slug IS NULL"},
		func(scan func(...any) error) (post, error) {
			var p post
			return p, scan(&p.ID, &p.Title)
		}, func(p post) backfill.Cursor { return backfill.Cursor{p.ID} })
	return backfill.MustDefine("crash-slugs", backfill.AllTenants(), src, func(ctx context.Context, b backfill.Batch[post]) error {
		if err := appendLine(effects, fmt.Sprintf("page%d", b.Index)); err != nil {
			return err
		}
		for _, p := range b.Rows {
			if _, err := db.ExecContext(ctx, `UPDATE posts SET slug = lower(replace(title, ' ', '-')) WHERE id = $1`, p.ID); err != nil {
				return err
			}
		}
		time.Sleep(60 * time.Millisecond)
		return nil
	}, opts...)
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		return err
	}
	return f.Sync()
}

// crashChild runs a worker against the engine at BACKFILL_CRASH_SERVER until it is killed.
func crashChild() {
	db, err := openApp(os.Getenv("BACKFILL_CRASH_APP"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	c, err := api.NewClient(os.Getenv("BACKFILL_CRASH_SERVER"), "")
	if err != nil {
		os.Exit(3)
	}
	reg, _ := jobs.NewRegistry(crashBackfill(db, os.Getenv("BACKFILL_CRASH_EFFECTS"), os.Getenv("BACKFILL_CRASH_OVERLAP") != ""))
	w, err := worker.New(worker.Config{Frontend: c, Registry: reg, PollWait: 200 * time.Millisecond, Logger: testenv.Logger()})
	if err != nil {
		os.Exit(3)
	}
	_ = w.Start(context.Background())
	select {} // until SIGKILL
}

func startCrashChild(t *testing.T, env []string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), "BACKFILL_CRASH_CHILD=1")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func effectCounts(t *testing.T, path string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return counts
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		counts[strings.TrimSpace(sc.Text())]++
	}
	return counts
}

func TestSIGKILLedWorkerResumesAtThePageItStoppedAt(t *testing.T) {
	sigkillResume(t, false)
}

// With OverlapCheckpoints a kill may land while a page's checkpoint commits and the next page's
// handler runs: both are handled again, never a page whose checkpoint had committed.
func TestSIGKILLedOverlappingWorkerRunsAtMostTwoPagesAgain(t *testing.T) {
	sigkillResume(t, true)
}

func sigkillResume(t *testing.T, overlap bool) {
	maxExtra := 1
	if overlap {
		maxExtra = 2
	}
	testenv.EachBackend(t, testenv.Options{Clock: clock.Real{}, Lease: time.Second}, func(t *testing.T, env *testenv.Env) {
		dir := t.TempDir()
		appPath, effects := filepath.Join(dir, "app.db"), filepath.Join(dir, "effects.log")
		db, err := openApp(appPath)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`CREATE TABLE posts (id INTEGER PRIMARY KEY, title TEXT NOT NULL, slug TEXT)`); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= crashRows; i++ {
			if _, err := db.Exec(`INSERT INTO posts (id, title) VALUES ($1, $2)`, i, fmt.Sprintf("Post Number %d", i)); err != nil {
				t.Fatal(err)
			}
		}
		srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		defer ts.Close()
		defer srv.Drain()
		childEnv := []string{"BACKFILL_CRASH_SERVER=" + ts.URL, "BACKFILL_CRASH_APP=" + appPath, "BACKFILL_CRASH_EFFECTS=" + effects}
		if overlap {
			childEnv = append(childEnv, "BACKFILL_CRASH_OVERLAP=1")
		}

		b := crashBackfill(db, effects, overlap)
		res, err := b.Enqueue(context.Background(), env.Engine, backfill.Input{})
		if err != nil {
			t.Fatal(err)
		}
		first := startCrashChild(t, childEnv)
		eventually(t, "page 4 to start", func() bool { return effectCounts(t, effects)["page4"] == 1 }, nil)
		if err := first.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = first.Wait()
		killedAt := effectCounts(t, effects)

		startCrashChild(t, childEnv)
		run := env.Await(res.RunID, store.StateCompleted)
		out := result(t, b, run)
		// The pages in flight at the kill may have written some of their rows; the source's
		// predicate (slug IS NULL) no longer selects those, so the pass counts at most that
		// many pages fewer rows than the table holds.
		if out.Rows > crashRows || out.Rows < int64(crashRows-maxExtra*crashBatch) {
			t.Fatalf("result = %+v; want %d rows less at most %d pages", out, crashRows, maxExtra)
		}

		// Every page ran once, except the one in flight at the kill, which ran at most once more.
		got := effectCounts(t, effects)
		extra := 0
		for i := 0; i < int(out.Batches); i++ {
			n := got[fmt.Sprintf("page%d", i)]
			if i == int(out.Batches)-1 && n == 0 {
				continue // the last, empty page handles nothing
			}
			if n < 1 || n > 2 {
				t.Fatalf("page %d ran %d times (effects %v)", i, n, got)
			}
			extra += n - 1
			if n == 2 && killedAt[fmt.Sprintf("page%d", i)] != 1 {
				t.Fatalf("page %d ran twice but was not in flight at the kill (effects %v, at the kill %v)", i, got, killedAt)
			}
		}
		if extra > maxExtra {
			t.Fatalf("the handler ran %d extra pages after the kill; want at most %d (effects %v)", extra, maxExtra, got)
		}
		recorded := map[string]int{}
		for _, ev := range env.History(res.RunID) {
			if ev.Kind == history.KindStepCompleted {
				recorded[ev.Name]++
			}
		}
		for i := 0; i < int(out.Batches); i++ {
			if recorded[fmt.Sprintf("batch:%d", i)] != 1 {
				t.Fatalf("batch:%d recorded %d times", i, recorded[fmt.Sprintf("batch:%d", i)])
			}
		}
		var left int
		if err := db.QueryRow(`SELECT count(*) FROM posts WHERE slug IS NULL`).Scan(&left); err != nil || left != 0 {
			t.Fatalf("%d posts left without a slug (%v)", left, err)
		}
		rows := ledger(t, env, "crash-slugs")
		if len(rows) != 1 || rows[0].Status != backfill.StatusCompleted || rows[0].Rows != out.Rows || rows[0].Total != crashRows {
			t.Fatalf("ledger = %+v; want one completed row of %d rows, counted %d at the start", rows, out.Rows, crashRows)
		}
		if killedAt["page4"] != 1 || got["page3"] != 1 {
			t.Fatalf("the kill did not land mid-pass: at the kill %v", killedAt)
		}
		t.Logf("effects per page: %v", got)
	})
}
