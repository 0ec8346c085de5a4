package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

func TestMain(m *testing.M) {
	// fx's signal relay starts os/signal's process-wide reader, which by design never exits.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("os/signal.signal_recv"), goleak.IgnoreTopFunction("os/signal.loop"))
}

// result is one command line's outcome.
type result struct {
	code           int
	stdout, stderr string
}

func runCmd(ctx context.Context, args ...string) result {
	var out, errb testenv.LogBuffer
	code := run(ctx, args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// opsEnv is an engine on a memory store behind the API, and the flags that reach it.
type opsEnv struct {
	env    *testenv.Env
	server []string
}

func setupOps(t *testing.T) *opsEnv {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)
	return &opsEnv{env: env, server: []string{"--server", ts.URL, "--token", "tok"}}
}

func (o *opsEnv) run(t *testing.T, args ...string) result {
	t.Helper()
	// Connection flags go after the subcommand path (they belong to the command groups).
	var path []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		path, args = append(path, args[0]), args[1:]
	}
	full := append(append(path, o.server...), args...)
	return runCmd(context.Background(), full...)
}

func expect(t *testing.T, r result, code int, stderrPrefix string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	if stderrPrefix != "" && !strings.HasPrefix(r.stderr, stderrPrefix) {
		t.Fatalf("stderr %q, want it to start with %q", r.stderr, stderrPrefix)
	}
}

func TestOperatorCommands(t *testing.T) {
	t.Parallel()
	o := setupOps(t)

	// Enqueue: the key and the tenant are the caller's to name.
	expect(t, o.run(t, "jobs", "enqueue", "onboard-org", "--input", `{"orgId":"a"}`, "--tenant", "a"), 2, "X_JOB_IDEMPOTENCY_REQUIRED: ")
	expect(t, o.run(t, "jobs", "enqueue", "onboard-org", "--key", "k"), 2, "X_JOB_TENANT_REQUIRED: ")
	expect(t, o.run(t, "jobs", "enqueue", "onboard-org", "--key", "k", "--tenant", "a", "--no-tenant"), 2, "X_JOB_TENANT_REQUIRED: ")
	expect(t, o.run(t, "jobs", "enqueue", "onboard-org", "--key", "k", "--tenant", "a", "--input", "{nope"), 2, "X_BAD_REQUEST: ")
	r := o.run(t, "jobs", "enqueue", "onboard-org", "--input", `{"orgId":"a"}`, "--key", "onboard:a", "--tenant", "a", "--json")
	expect(t, r, 0, "")
	var res jobs.EnqueueResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.RunID == "" || res.Deduped {
		t.Fatalf("enqueue --json printed %q", r.stdout)
	}
	r = o.run(t, "jobs", "enqueue", "onboard-org", "--input", `{"orgId":"a"}`, "--key", "onboard:a", "--tenant", "a")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, res.RunID) || !strings.Contains(r.stdout, "deduped") {
		t.Fatalf("second enqueue printed %q", r.stdout)
	}

	// Listings.
	r = o.run(t, "jobs", "ls", "--json")
	expect(t, r, 0, "")
	var ls struct {
		Queues []engine.QueueView  `json:"queues"`
		Runs   []engine.RunSummary `json:"runs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ls); err != nil || len(ls.Runs) != 1 || ls.Runs[0].ID != res.RunID ||
		len(ls.Queues) != 1 || ls.Queues[0].Counts[store.StateReady] != 1 {
		t.Fatalf("ls --json printed %q (%v)", r.stdout, err)
	}
	r = o.run(t, "jobs", "ls")
	expect(t, r, 0, "")
	for _, want := range []string{"QUEUE", "READY", "default", res.RunID, "onboard-org", "ago (20"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("ls printed\n%s\nwithout %q", r.stdout, want)
		}
	}
	expect(t, o.run(t, "jobs", "ls", "--state", "bogus"), 2, "X_BAD_REQUEST: ")
	expect(t, o.run(t, "jobs", "ls", "--limit", "0"), 2, "X_BAD_REQUEST: ")

	r = o.run(t, "jobs", "show", res.RunID)
	expect(t, r, 0, "")
	if !regexp.MustCompile(`State\s+ready`).MatchString(r.stdout) || !strings.Contains(r.stdout, `{"orgId":"a"}`) {
		t.Fatalf("show printed\n%s", r.stdout)
	}
	r = o.run(t, "jobs", "show", res.RunID, "--json")
	var v engine.RunView
	if json.Unmarshal([]byte(r.stdout), &v) != nil || v.ID != res.RunID {
		t.Fatalf("show --json printed %q", r.stdout)
	}
	expect(t, o.run(t, "jobs", "show", "no-such-run"), 1, "X_RUN_NOT_FOUND: ")
	expect(t, o.run(t, "jobs", "show"), 2, "X_BAD_REQUEST: ")

	// History, in the three formats.
	r = o.run(t, "history", "dump", res.RunID)
	expect(t, r, 0, "")
	if evs, err := history.Load(strings.NewReader(r.stdout)); err != nil || len(evs) != 1 {
		t.Fatalf("dump printed %q (%v)", r.stdout, err)
	}
	r = o.run(t, "history", "dump", res.RunID, "--format", "table")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "RunStarted") || !strings.Contains(r.stdout, "SEQ") {
		t.Fatalf("dump --format table printed %q", r.stdout)
	}
	r = o.run(t, "history", "dump", res.RunID, "--format", "json")
	var arr []map[string]any
	if json.Unmarshal([]byte(r.stdout), &arr) != nil || len(arr) != 1 {
		t.Fatalf("dump --format json printed %q", r.stdout)
	}
	expect(t, o.run(t, "history", "dump", res.RunID, "--format", "xml"), 2, "X_BAD_REQUEST: ")

	// Events.
	r = o.run(t, "events", "publish", "plan.chosen", "--payload", `{"orgId":"a","plan":"pro"}`, "--json")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, `"eventId"`) {
		t.Fatalf("publish --json printed %q", r.stdout)
	}
	expect(t, o.run(t, "events", "publish", "plan.chosen", "--payload", `{`), 2, "X_BAD_REQUEST: ")

	// Cancel, then the refusals of a finished run.
	r = o.run(t, "jobs", "cancel", res.RunID, "--reason", "test")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "cancelled run "+res.RunID) {
		t.Fatalf("cancel printed %q", r.stdout)
	}
	expect(t, o.run(t, "jobs", "cancel", res.RunID), 1, "X_JOB_NOT_CANCELLABLE: ")
	expect(t, o.run(t, "jobs", "retry", res.RunID, "--reason", "again"), 1, "X_JOB_NOT_RETRYABLE: ")

	r = o.run(t, "dead-letters", "--json")
	expect(t, r, 0, "")
	var dl api.RunPage
	if json.Unmarshal([]byte(r.stdout), &dl) != nil || dl.Runs == nil || len(dl.Runs) != 0 {
		t.Fatalf("dead-letters --json printed %q", r.stdout)
	}
	r = o.run(t, "dead-letters")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "no dead letters") {
		t.Fatalf("dead-letters printed %q", r.stdout)
	}
	r = o.run(t, "codes", "--json")
	var cl api.CodeList
	if json.Unmarshal([]byte(r.stdout), &cl) != nil || len(cl.Codes) != len(jobs.Codes()) {
		t.Fatalf("codes --json printed %q", r.stdout)
	}
	r = o.run(t, "codes")
	if !strings.Contains(r.stdout, "X_JOB_NOT_CANCELLABLE") || !strings.Contains(r.stdout, "CLASS") {
		t.Fatalf("codes printed %q", r.stdout)
	}
}

func TestOperatorCommandsRefusedWithoutTheToken(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	bad := []string{"jobs", "ls", "--server", o.server[1], "--token", "wrong"}
	expect(t, runCmd(context.Background(), bad...), 1, "X_UNAUTHORIZED: ")
}

func TestUsageAndUnreachableEngine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	expect(t, runCmd(ctx, "jobs", "ls", "--no-such-flag"), 2, "X_BAD_REQUEST: ")
	expect(t, runCmd(ctx, "no-such-command"), 2, "X_BAD_REQUEST: ")
	expect(t, runCmd(ctx, "jobs", "cancel"), 2, "X_BAD_REQUEST: ")
	expect(t, runCmd(ctx, "jobs", "ls", "--server", "ftp://x"), 2, "X_BAD_REQUEST: ")
	// Nothing listens on port 1: the engine cannot be reached, a retryable outage.
	expect(t, runCmd(ctx, "jobs", "ls", "--server", "127.0.0.1:1", "--timeout", "2s"), 1, "X_ENGINE_UNREACHABLE: ")
	r := runCmd(ctx, "--help")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "migrate") || !strings.Contains(r.stdout, "--database-url") {
		t.Fatalf("help printed %q", r.stdout)
	}
}

func TestServeAndDrain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr testenv.LogBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--database-url", "", "--token", "t", "--allow-undeclared"}, &bytes.Buffer{}, &stderr)
	}()
	addr := ""
	re := regexp.MustCompile(`jobs.api.listening addr=(\S+)`)
	for deadline := time.Now().Add(30 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatalf("the engine did not start:\n%s", stderr.String())
	}
	expect(t, runCmd(ctx, "jobs", "enqueue", "j", "--input", "null", "--key", "k", "--no-tenant", "--server", addr, "--token", "t"), 0, "")
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d:\n%s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not drain within 15s")
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs.db")); err != nil {
		t.Fatalf("no SQLite database under --data-dir: %v", err)
	}
}

func TestDatabaseSelection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := runCmd(ctx, "migrate", "--data-dir", dir, "--database-url", "")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "sqlite") {
		t.Fatalf("migrate printed %q", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs.db")); err != nil {
		t.Fatal(err)
	}
	expect(t, runCmd(ctx, "migrate", "--database-url", "mysql://db/jobs"), 1, "X_DRIVER_UNAVAILABLE: ")
	expect(t, runCmd(ctx, "serve", "--database-url", "mysql://db/jobs"), 1, "X_DRIVER_UNAVAILABLE: ")

	o := dbOptions{url: "postgresql://user:secret@db.internal:5432/app?sslmode=require", schema: "jobs"}
	if pg, err := o.postgres(); !pg || err != nil {
		t.Fatalf("postgresql:// is Postgres: %v %v", pg, err)
	}
	if d := o.describe(); strings.Contains(d, "secret") || !strings.Contains(d, "db.internal:5432") {
		t.Fatalf("describe = %q: the password must not reach the logs", d)
	}
}

func TestAgo(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		0: "just now", 5 * time.Second: "5s ago", 3 * time.Minute: "3m ago", 2*time.Hour + 5*time.Minute: "2h5m ago",
		30 * time.Hour: "30h ago", 72 * time.Hour: "3d ago", -10 * time.Minute: "in 10m",
	} {
		if got := ago(now, now.Add(-d)); got != want {
			t.Errorf("ago(%s) = %q, want %q", d, got, want)
		}
	}
	if got := when(now, now.Add(-time.Minute)); got != "1m ago (2026-01-05T08:59:00Z)" {
		t.Errorf("when = %q", got)
	}
}
