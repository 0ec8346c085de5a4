package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// history dump takes --json like every listing: one JSON array, the same as --format json.
func TestHistoryDumpJSON(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	r := o.run(t, "jobs", "enqueue", "onboard-org", "--input", `{"orgId":"a"}`, "--key", "k", "--tenant", "a", "--json")
	expect(t, r, 0, "")
	var res jobs.EnqueueResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatal(err)
	}
	r = o.run(t, "history", "dump", res.RunID, "--json")
	expect(t, r, 0, "")
	var arr []map[string]any
	if json.Unmarshal([]byte(r.stdout), &arr) != nil || len(arr) != 1 || arr[0]["kind"] != "RunStarted" {
		t.Fatalf("dump --json printed %q", r.stdout)
	}
	expect(t, o.run(t, "history", "dump", res.RunID, "--json", "--format", "table"), 2, "X_BAD_REQUEST: ")
}

// A publish without --payload and an enqueue without --input are usage errors (exit 2), not a
// silent null; --payload null and --input null say so on purpose.
func TestPayloadAndInputAreRequired(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	expect(t, o.run(t, "events", "publish", "plan.chosen"), 2, "X_BAD_REQUEST: give the event's payload")
	expect(t, o.run(t, "jobs", "enqueue", "onboard-org", "--key", "k", "--tenant", "a"), 2, "X_BAD_REQUEST: give the job's input")
	expect(t, o.run(t, "events", "publish", "plan.chosen", "--payload", "null"), 0, "")
	expect(t, o.run(t, "jobs", "enqueue", "onboard-org", "--key", "k", "--tenant", "a", "--input", "null"), 0, "")
}

// dead-letters clips an error to 80 characters in its table; --full prints it whole.
func TestDeadLettersFull(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	long := "the card issuer declined the charge: " + strings.Repeat("detail ", 20) + "END-OF-ERROR"
	j := jobs.MustDefine("charge", func(string) string { return "c" }, jobs.NoTenant[string](),
		func(*jobs.Ctx, string) (string, error) { return "", jobs.Errorf(jobs.CodeBadRequest, "%s", long) },
		jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
	o.env.Worker(worker.Config{}, j)
	res, err := j.Enqueue(context.Background(), o.env.Engine, "x")
	if err != nil {
		t.Fatal(err)
	}
	o.env.Await(res.RunID, store.StateFailed)
	r := o.run(t, "dead-letters")
	expect(t, r, 0, "")
	if strings.Contains(r.stdout, "END-OF-ERROR") || !strings.Contains(r.stdout, res.RunID) {
		t.Fatalf("dead-letters (clipped) printed\n%s", r.stdout)
	}
	r = o.run(t, "dead-letters", "--full")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "END-OF-ERROR") {
		t.Fatalf("dead-letters --full printed\n%s", r.stdout)
	}
}

// --database-schema without a database URL would be ignored (SQLite has no schemas): refused.
func TestSchemaWithoutURLIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"migrate", "--database-url", "", "--database-schema", "app_jobs", "--data-dir", dir},
		{"serve", "--database-url", "", "--database-schema", "app_jobs", "--data-dir", dir, "--addr", "127.0.0.1:0"},
	} {
		expect(t, runCmd(context.Background(), args...), 2, "X_BAD_REQUEST: --database-schema")
	}
	expect(t, runCmd(context.Background(), "serve", "--database-url", "", "--database-write-implied-events",
		"--data-dir", dir, "--addr", "127.0.0.1:0"), 2, "X_BAD_REQUEST: --database-write-implied-events")
}

// A bad database URL prints one clean error, without fx's constructor chain or stack.
func TestBadDatabaseURLPrintsACleanError(t *testing.T) {
	r := runCmd(context.Background(), "serve", "--database-url", "postgres://u:p@127.0.0.1:1/x", "--addr", "127.0.0.1:0")
	expect(t, r, 1, "")
	if !strings.Contains(r.stderr, "X_DRIVER_UNAVAILABLE: postgres: connect") {
		t.Fatalf("stderr %q", r.stderr)
	}
	for _, noise := range []string{"stack=", "could not build arguments", "error returned"} {
		if strings.Contains(r.stderr, noise) {
			t.Errorf("stderr carries fx's %q:\n%s", noise, r.stderr)
		}
	}
	// One line: the driver's error holds one line per address it tried.
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if !strings.Contains(l, "msg=jobs.engine.starting") && !strings.HasPrefix(l, "X_DRIVER_UNAVAILABLE: ") {
			t.Errorf("the error is not one line: %q in\n%s", l, r.stderr)
		}
	}
}

// A command group run without a subcommand, or with an unknown one, is a usage error (exit 2).
func TestGroupsRequireASubcommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	expect(t, runCmd(ctx, "jobs"), 2, `X_BAD_REQUEST: "engine jobs" needs a subcommand`)
	expect(t, runCmd(ctx, "jobs", "bogus"), 2, `X_BAD_REQUEST: unknown command "bogus" for "engine jobs"`)
	expect(t, runCmd(ctx, "events"), 2, "X_BAD_REQUEST: ")
	expect(t, runCmd(ctx, "jobs", "--help"), 0, "")
}

// `engine help` of a topic it does not know is a usage error (exit 2), as the unknown command
// is: it printed the root's help and exited 0. Help of a known command, and --help, exit 0.
func TestHelpOfAnUnknownTopicIsAUsageError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	expect(t, runCmd(ctx, "help", "no-such-command"), 2, `X_BAD_REQUEST: unknown help topic "no-such-command"; "engine" has: `)
	expect(t, runCmd(ctx, "help", "jobs", "bogus"), 2, `X_BAD_REQUEST: unknown help topic "jobs bogus"; "engine jobs" has: cancel, enqueue, ls, retry, show`)
	expect(t, runCmd(ctx, "help", "jobs", "ls", "extra"), 2, `X_BAD_REQUEST: unknown help topic "jobs ls extra"`)
	for _, args := range [][]string{{"help"}, {"help", "jobs"}, {"help", "jobs", "ls"}, {"--help"}, {"jobs", "ls", "--help"}} {
		r := runCmd(ctx, args...)
		expect(t, r, 0, "")
		if !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("%q printed no help:\n%s", args, r.stdout)
		}
	}
	if r := runCmd(ctx, "help", "jobs", "ls"); !strings.Contains(r.stdout, "engine jobs ls") {
		t.Errorf("help jobs ls is not the help of jobs ls:\n%s", r.stdout)
	}
}

// A second migrate says the database is already up to date, on SQLite and (with
// TEST_DATABASE_URL) Postgres.
func TestSecondMigrateIsUpToDate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbs := [][]string{{"--database-url", "", "--data-dir", t.TempDir()}}
	if url, schema := freshSchemaIfAny(t); url != "" {
		dbs = append(dbs, []string{"--database-url", url, "--database-schema", schema})
	}
	for _, db := range dbs {
		r := runCmd(ctx, append([]string{"migrate"}, db...)...)
		expect(t, r, 0, "")
		if !strings.HasPrefix(r.stdout, "migrated ") || !strings.Contains(r.stdout, "migrations applied") {
			t.Fatalf("first migrate printed %q", r.stdout)
		}
		r = runCmd(ctx, append([]string{"migrate"}, db...)...)
		expect(t, r, 0, "")
		if !strings.Contains(r.stdout, "is already up to date") {
			t.Fatalf("second migrate printed %q", r.stdout)
		}
	}
}

func freshSchemaIfAny(t *testing.T) (url, schema string) {
	if os.Getenv("TEST_DATABASE_URL") == "" {
		return "", ""
	}
	return testenv.FreshSchema(t)
}

// $JOBS_DB_WRITE_IMPLIED_EVENTS is a boolean: a value that is not one is refused, not read as
// false; a true one without a database URL is refused like the flag.
func TestWriteImpliedEventsEnv(t *testing.T) {
	dir := t.TempDir()
	args := []string{"serve", "--database-url", "", "--data-dir", dir, "--addr", "127.0.0.1:0"}
	t.Setenv("JOBS_DB_WRITE_IMPLIED_EVENTS", "yes please")
	expect(t, runCmd(context.Background(), args...), 2, "X_BAD_REQUEST: $JOBS_DB_WRITE_IMPLIED_EVENTS")
	t.Setenv("JOBS_DB_WRITE_IMPLIED_EVENTS", "true")
	expect(t, runCmd(context.Background(), args...), 2, "X_BAD_REQUEST: --database-write-implied-events")
}
