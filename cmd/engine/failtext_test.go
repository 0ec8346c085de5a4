package main

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// setupSQLiteOps is setupOps on a SQLite file: the failures below are rendered from what the
// file holds.
func setupSQLiteOps(t *testing.T) *opsEnv {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Store: testenv.OpenSQLite(t)})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)
	return &opsEnv{env: env, server: []string{"--server", ts.URL, "--token", "tok"}}
}

func showJSON(t *testing.T, o *opsEnv, id string) engine.RunView {
	t.Helper()
	r := o.run(t, "jobs", "show", id, "--json")
	expect(t, r, 0, "")
	var v engine.RunView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("jobs show --json: %v\n%s", err, r.stdout)
	}
	return v
}

// After `jobs retry` of a dead-lettered run, the next failure is the run's next attempt, not a
// second "attempt 1": through the CLI, on SQLite, for a terminal stop (its unspent attempts go on)
// and for exhausted attempts (the retry grants one more, and says so).
func TestRetriedRunCountsItsAttemptsOn(t *testing.T) {
	t.Parallel()
	o := setupSQLiteOps(t)
	terminal := jobs.MustDefine("charge", func(string) string { return "c" }, jobs.NoTenant[string](),
		func(*jobs.Ctx, string) (string, error) { return "", jobs.Errorf(jobs.CodeBadRequest, "declined") },
		jobs.Retry(jobs.RetryPolicy{Attempts: 3}))
	plain := jobs.MustDefine("flaky", func(string) string { return "f" }, jobs.NoTenant[string](),
		func(*jobs.Ctx, string) (string, error) { return "", jobs.Errorf("X_APP_DOWN", "down") },
		jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
	o.env.Worker(worker.Config{}, terminal, plain)

	for _, tc := range []struct {
		def      jobs.Definition
		enqueue  func() (string, error)
		wantLast string
	}{
		{terminal, func() (string, error) {
			r, err := terminal.Enqueue(t.Context(), o.env.Engine, "x")
			return r.RunID, err
		},
			"(stopped at attempt 2 of 3: X_BAD_REQUEST is terminal)"},
		{plain, func() (string, error) { r, err := plain.Enqueue(t.Context(), o.env.Engine, "x"); return r.RunID, err },
			"(attempt 2, granted by a retry past the policy's 1: attempts exhausted)"},
	} {
		id, err := tc.enqueue()
		if err != nil {
			t.Fatal(err)
		}
		o.env.Await(id, store.StateFailed)
		expect(t, o.run(t, "jobs", "retry", id), 0, "")
		o.env.Await(id, store.StateFailed)
		v := showJSON(t, o, id)
		if len(v.Attempts) != 2 || v.Attempts[0].Attempt != 1 || v.Attempts[1].Attempt != 2 || v.Attempt != 2 {
			t.Fatalf("%s: run on attempt %d, failures %+v; want attempts 1 then 2", id, v.Attempt, v.Attempts)
		}
		if !strings.HasSuffix(v.Attempts[1].Error, tc.wantLast) {
			t.Errorf("%s: the second failure says %q, want it to end %q", id, v.Attempts[1].Error, tc.wantLast)
		}
		// The text forms agree: the failed-attempts table and dead-letters list attempt 2.
		r := o.run(t, "jobs", "show", id)
		expect(t, r, 0, "")
		if !strings.Contains(r.stdout, "Attempt   2\n") {
			t.Errorf("jobs show:\n%s", r.stdout)
		}
		r = o.run(t, "dead-letters", "--full")
		expect(t, r, 0, "")
		var row string
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(l, id) {
				row = l
			}
		}
		if f := strings.Fields(row); len(f) < 4 || f[3] != "2" {
			t.Errorf("dead-letters lists %q, want attempt 2", row)
		}
	}
}

// A terminal failure's message says "terminal" once, in every text the CLI renders: the run's
// Error line, its failed attempt and the dead letter. Also when the error is a child's terminal
// failure that made its parent fail terminally (two verdicts meet in one message).
func TestTerminalFailureSaysTerminalOnce(t *testing.T) {
	t.Parallel()
	o := setupSQLiteOps(t)
	type in struct {
		ID string `json:"id"`
	}
	child := jobs.MustDefine("kid", func(i in) string { return "k:" + i.ID }, jobs.NoTenant[in](),
		func(*jobs.Ctx, in) (string, error) { return "", jobs.Errorf(jobs.CodeBadRequest, "declined") },
		jobs.Retry(jobs.RetryPolicy{Attempts: 2}))
	parent := jobs.MustDefine("mom", func(i in) string { return "m:" + i.ID }, jobs.NoTenant[in](),
		func(c *jobs.Ctx, i in) (string, error) { return child.Call(c, "kid", i) },
		jobs.Retry(jobs.RetryPolicy{Attempts: 3}))
	o.env.Worker(worker.Config{}, child, parent)
	res, err := parent.Enqueue(t.Context(), o.env.Engine, in{ID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	o.env.Await(res.RunID, store.StateFailed)
	kid := showJSON(t, o, res.RunID).Children[0].RunID

	for _, id := range []string{kid, res.RunID} {
		v := showJSON(t, o, id)
		if v.StopReason != "terminal" {
			t.Fatalf("%s stopped %q, want terminal", id, v.StopReason)
		}
		texts := map[string]string{"error": v.Error}
		for _, a := range v.Attempts {
			texts["attempt error"] = a.Error
		}
		r := o.run(t, "jobs", "show", id)
		expect(t, r, 0, "")
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(l, "Error ") {
				texts["show's Error line"] = l
			}
		}
		r = o.run(t, "dead-letters", "--full")
		expect(t, r, 0, "")
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(l, id) {
				// The STOP column says terminal; the error after it says it once more, no more.
				texts["dead letter's error"] = l[strings.Index(l, "terminal")+len("terminal"):]
			}
		}
		if len(texts) != 4 {
			t.Fatalf("%s: found only %v", id, texts)
		}
		for what, s := range texts {
			if n := strings.Count(s, "terminal"); n != 1 {
				t.Errorf("%s: %s says terminal %d times: %q", id, what, n, s)
			}
		}
	}
}
