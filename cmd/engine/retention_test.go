package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// engine retention run: a dry run lists and deletes nothing; a run deletes; only an admin may
// run it, and no tenant-scoped credential may look.
func TestRetentionCommand(t *testing.T) {
	t.Parallel()
	// The sweeper's own interval is out of reach: only the command sweeps.
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Retention: engine.RetentionConfig{Every: 1000 * time.Hour}})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Token: "tok", Credentials: []api.Credential{
		{Token: "view", Role: api.RoleViewer}, {Token: "op", Role: api.RoleOperator}, {Token: "acme", Role: api.RoleOperator, Tenant: "acme"}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)
	as := func(token string) *opsEnv {
		return &opsEnv{env: env, server: []string{"--server", ts.URL, "--token", token}}
	}
	admin := as("tok")

	ctx := context.Background()
	var ids []string
	for _, k := range []string{"a", "b"} {
		res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Queue: "q", Key: k, NoTenant: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.Engine.Cancel(ctx, res.RunID, "test"); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.RunID)
	}
	live, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Queue: "q", Key: "live", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	env.Fake().Advance(8 * 24 * time.Hour)

	r := as("view").run(t, "retention", "run", "--dry-run", "--json")
	expect(t, r, 0, "")
	var dry engine.RetentionReport
	if err := json.Unmarshal([]byte(r.stdout), &dry); err != nil {
		t.Fatalf("--dry-run --json: %v\n%s", err, r.stdout)
	}
	if !dry.DryRun || dry.Runs != 2 || dry.ByState["cancelled"] != 2 || len(dry.Oldest) != 2 {
		t.Fatalf("dry run: %+v, want the 2 cancelled runs", dry)
	}
	r = admin.run(t, "retention", "run", "--dry-run")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "would delete 2 run(s) (cancelled 2)") || !strings.Contains(r.stdout, ids[0]) {
		t.Errorf("dry run table:\n%s", r.stdout)
	}
	for _, id := range ids {
		if _, err := env.Engine.GetRun(ctx, id); err != nil {
			t.Fatalf("a dry run deleted %s: %v", id, err)
		}
	}

	for _, who := range []string{"view", "op", "acme"} {
		expect(t, as(who).run(t, "retention", "run"), 1, "X_FORBIDDEN: ")
	}
	expect(t, as("acme").run(t, "retention", "run", "--dry-run"), 1, "X_FORBIDDEN: ")

	r = admin.run(t, "retention", "run", "--json")
	expect(t, r, 0, "")
	var rep engine.RetentionReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("run --json: %v\n%s", err, r.stdout)
	}
	if rep.DryRun || rep.Runs != 2 || rep.Events != 4 {
		t.Fatalf("run: %+v, want 2 runs and their 4 events deleted", rep)
	}
	for _, id := range ids {
		if _, err := env.Engine.GetRun(ctx, id); jobs.CodeOf(err) != jobs.CodeRunNotFound {
			t.Errorf("run %s after the sweep: %v", id, err)
		}
	}
	if _, err := env.Engine.GetRun(ctx, live.RunID); err != nil {
		t.Errorf("the live run went: %v", err)
	}
	r = admin.run(t, "retention", "run")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "deleted 0 run(s)") {
		t.Errorf("a second sweep:\n%s", r.stdout)
	}
}

func TestRetentionPeriodFlag(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "36h": 36 * time.Hour, "off": -1, " 30d ": 30 * 24 * time.Hour} {
		if got, err := retentionPeriod("--retention", in); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "5m", "-7d", "0d", "7days", "x", "1e9d"} {
		if _, err := retentionPeriod("--retention", in); err == nil {
			t.Errorf("%q: accepted", in)
		}
	}
}

// serve refuses a bad flag with nothing created, --retention-archive's directory included: it is
// made only once every flag was accepted, as the engine starts.
func TestRefusedServeCreatesNoArchiveDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	arch := filepath.Join(dir, "archive", "runs")
	base := []string{"serve", "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--database-url", "",
		"--no-scheduler", "--retention-archive", arch}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--log-level", "loud"}, "X_BAD_REQUEST: --log-level"},
		{[]string{"--database-write-implied-events"}, "X_BAD_REQUEST: --database-write-implied-events"},
		{[]string{"--token", "same", "--viewer-token", "same"}, "X_BAD_REQUEST: "},
		{[]string{"--addr", "0.0.0.0:0"}, "X_BAD_REQUEST: --addr"},
	} {
		// Bounded: an engine that started anyway would serve until its context ends.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		expect(t, runCmd(ctx, append(base, tc.args...)...), 2, tc.want)
		cancel()
		if _, err := os.Stat(filepath.Join(dir, "archive")); !os.IsNotExist(err) {
			t.Fatalf("%q: serve was refused but created --retention-archive: %v", tc.args, err)
		}
	}
}
