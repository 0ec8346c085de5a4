package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// A wrong command line is a usage error (exit 2) with a message saying what is wrong, found
// before anything is asked of the engine, not an engine refusal (exit 1), a route the engine
// does not serve, or a flag quietly read as its default.
func TestUsageErrorsAreCaughtByTheCommandLine(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"jobs", "show", ""}, "X_BAD_REQUEST: the run id is empty"},
		{[]string{"jobs", "show", " "}, "X_BAD_REQUEST: the run id is empty"},
		{[]string{"jobs", "cancel", ""}, "X_BAD_REQUEST: the run id is empty"},
		{[]string{"jobs", "retry", ""}, "X_BAD_REQUEST: the run id is empty"},
		{[]string{"history", "dump", ""}, "X_BAD_REQUEST: the run id is empty"},
		{[]string{"schedules", "show", ""}, "X_BAD_REQUEST: the schedule name is empty"},
		{[]string{"events", "publish", "", "--payload", "null"}, "X_BAD_REQUEST: the event name is empty"},
		{[]string{"jobs", "enqueue", "", "--input", "null", "--key", "k", "--no-tenant"}, "X_BAD_REQUEST: the job name is empty"},
		{[]string{"overview", "--bucket", "1ns"}, "X_BAD_REQUEST: --window 15m0s, --bucket 1ns: "},
		{[]string{"overview", "--bucket", "0"}, "X_BAD_REQUEST: --bucket 0s: want a positive duration"},
		{[]string{"overview", "--window", "-1m"}, "X_BAD_REQUEST: --window -1m0s: want a positive duration"},
		{[]string{"overview", "--window", "1m", "--bucket", "1h"}, "X_BAD_REQUEST: --bucket 1h0m0s is wider than --window 1m0s"},
		{[]string{"manifest", "--kind", "bogus"}, `X_BAD_REQUEST: --kind "bogus": nothing is declared of that kind`},
		{[]string{"jobs", "ls", "--before", "bogus"}, `X_BAD_REQUEST: --before "bogus" is not a run id`},
		{[]string{"dead-letters", "--before", "01A23CFA-FD15-7FBC-AD48-E2EAF8CCD44A"}, "X_BAD_REQUEST: --before "},
		{[]string{"jobs", "ls", "--timeout", "-5s"}, "X_BAD_REQUEST: --timeout -5s: want a positive duration"},
		{[]string{"jobs", "ls", "--timeout", "0s"}, "X_BAD_REQUEST: --timeout 0s: want a positive duration"},
		{[]string{"jobs", "enqueue", "j", "--input", "null", "--key", "k", "--no-tenant", "--delay", "-5s"}, "X_BAD_REQUEST: --delay -5s"},
		{[]string{"jobs", "enqueue", "j", "--input", "null", "--key", "k", "--no-tenant", "--delay", "876001h"}, "X_BAD_REQUEST: --delay 876001h0m0s: want 0 (now) or a positive duration up to 876000h0m0s"},
		{[]string{"jobs", "enqueue", "j", "--input", "null", "--key", "k", "--no-tenant", "--priority", "101"}, "X_BAD_REQUEST: --priority 101: want -100 to 100"},
		{[]string{"jobs", "enqueue", "j", "--input", "null", "--key", "k", "--no-tenant", "--priority", "-101"}, "X_BAD_REQUEST: --priority -101: want -100 to 100"},
	} {
		r := o.run(t, tc.args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	// The bounds hold on the inside too: a known kind with nothing declared, a well-formed
	// cursor, the extreme priorities and no delay are fine.
	expect(t, o.run(t, "manifest", "--kind", "schedule"), 0, "")
	expect(t, o.run(t, "jobs", "ls", "--before", "01a23cfa-fd15-7fbc-ad48-e2eaf8ccd44a"), 0, "")
	expect(t, o.run(t, "overview", "--window", "1h", "--bucket", "1h"), 0, "")
	for _, p := range []string{"-100", "100"} {
		expect(t, o.run(t, "jobs", "enqueue", "j", "--input", "null", "--key", "k"+p, "--no-tenant", "--priority", p, "--delay", "0s"), 0, "")
	}
	// The delay's bound is the engine's own, jobs.WakeHorizon: a delay of exactly it is taken.
	expect(t, o.run(t, "jobs", "enqueue", "j", "--input", "null", "--key", "horizon", "--no-tenant", "--delay", jobs.WakeHorizon.String()), 0, "")
}

// serve refuses a drain timeout that is not positive (every shutdown would fail its drain), and
// an environment duration it cannot read rather than quietly taking the default.
func TestServeRefusesANonPositiveDrainTimeout(t *testing.T) {
	dir := t.TempDir()
	// An engine that starts anyway is stopped after a while, and its exit code then fails the test.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	base := []string{"serve", "--database-url", "", "--data-dir", dir, "--addr", "127.0.0.1:0", "--no-scheduler"}
	for _, d := range []string{"-1s", "0s"} {
		expect(t, runCmd(ctx, append(base, "--drain-timeout", d)...), 2, "X_BAD_REQUEST: --drain-timeout must be positive")
	}
	t.Setenv("JOBS_DRAIN_TIMEOUT", "soon")
	expect(t, runCmd(ctx, base...), 2, `X_BAD_REQUEST: $JOBS_DRAIN_TIMEOUT "soon"`)
}

// Listings print [] for none in --json, and one "no …" line for none in a table rather than a
// bare header.
func TestEmptyListings(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	r := o.run(t, "backfill", "--all", "--json")
	expect(t, r, 0, "")
	var all struct {
		Backfills []dryRun `json:"backfills"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &all); err != nil || all.Backfills == nil {
		t.Errorf("backfill --all --json printed %q", r.stdout)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"backfill", "--list"}, "no backfill passes\n"},
		{[]string{"backfill", "--pending"}, "no backfills are declared to this engine\n"},
		{[]string{"manifest"}, "no declarations\n"},
		{[]string{"manifest", "--kind", "job"}, "no job declarations\n"},
		{[]string{"overview"}, "no queues\n"},
		{[]string{"backfill", "--all"}, "nothing pending\n"},
	} {
		r := o.run(t, tc.args...)
		expect(t, r, 0, "")
		if r.stdout != tc.want {
			t.Errorf("%q printed %q, want %q", tc.args, r.stdout, tc.want)
		}
	}
}

// events publish --match takes a nested value, which the engine matches by its canonical JSON
// as it does a wait's: the run waiting on {"a": {"b": 1}} receives the event.
func TestPublishMatchNested(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	def := jobs.MustDefine("await-nested", func(org string) string { return org }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, org string) (string, error) {
			p, _, err := jobs.WaitForEvent[map[string]string](c, "plan", "plan.nested",
				jobs.Match{"org": map[string]any{"id": org, "tier": []any{1, "pro"}}}, time.Hour)
			return p["plan"], err
		})
	o.env.Worker(worker.Config{}, def)
	res, err := def.Enqueue(context.Background(), o.env.Engine, "a")
	if err != nil {
		t.Fatal(err)
	}
	o.env.Await(res.RunID, store.StateSuspended)
	r := o.run(t, "events", "publish", "plan.nested", "--payload", `{"plan":"pro"}`, "--match", `{"org":{"tier":[1,"pro"],"id":"a"}}`, "--json")
	expect(t, r, 0, "")
	var pub jobs.Published
	if err := json.Unmarshal([]byte(r.stdout), &pub); err != nil || pub.Delivered != 1 {
		t.Fatalf("publish --match with a nested value printed %q; want one delivery", r.stdout)
	}
	run := o.env.Await(res.RunID, store.StateCompleted)
	if got, _ := def.Result(run.Result); got != "pro" {
		t.Errorf("result %q, want pro", got)
	}
}

// jobs show says when a delayed run is due.
func TestShowSaysWhenADelayedRunIsDue(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	r := o.run(t, "jobs", "enqueue", "j", "--input", "null", "--key", "later", "--no-tenant", "--delay", "90m", "--json")
	expect(t, r, 0, "")
	var res jobs.EnqueueResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.RunID == "" {
		t.Fatalf("enqueue --json: %q (%v)", r.stdout, err)
	}
	r = o.run(t, "jobs", "show", res.RunID, "--json")
	expect(t, r, 0, "")
	var v struct {
		CreatedAt time.Time  `json:"createdAt"`
		DueAt     *time.Time `json:"dueAt"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.DueAt == nil || !v.DueAt.Equal(v.CreatedAt.Add(90*time.Minute)) {
		t.Fatalf("jobs show --json: due %v (%v), want 90m after %v", v.DueAt, err, v.CreatedAt)
	}
	r = o.run(t, "jobs", "show", res.RunID)
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "\nDue ") || !strings.Contains(r.stdout, v.DueAt.UTC().Format(time.RFC3339)) {
		t.Fatalf("jobs show of a delayed run does not say when it is due:\n%s", r.stdout)
	}
}
