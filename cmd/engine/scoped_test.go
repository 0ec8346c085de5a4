package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
)

// serveEngine runs `engine serve` in-process on a free loopback port, over a SQLite file in a
// temp dir, with args added; it returns the engine's address and drains it when the test ends.
func serveEngine(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testenv.LogBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--database-url", "",
			"--no-scheduler"}, args...), &bytes.Buffer{}, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exited %d:\n%s", code, stderr.String())
			}
		case <-time.After(15 * time.Second):
			t.Error("serve did not drain within 15s")
		}
	})
	re := regexp.MustCompile(`jobs.api.listening addr=(\S+)`)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("the engine did not start:\n%s", stderr.String())
	return ""
}

// A tenant-scoped credential lists and shows its tenant's runs: the sections that span every
// tenant (the queues, the backfills in flight, a run's backfill ledger row), which the engine
// refuses it with X_FORBIDDEN, are left out and said so in one line on stderr; --json's stdout is
// the document alone, without those sections.
func TestScopedCredentialListsAndShowsItsRuns(t *testing.T) {
	t.Parallel()
	addr := serveEngine(t, "--token", "adm", "--credential", "operator@a=TOA", "--allow-undeclared")
	as := func(token string, args ...string) result {
		return runCmd(context.Background(), append(args, "--server", addr, "--token", token)...)
	}
	enqueue := func(token, tenant string) string {
		t.Helper()
		r := as(token, "jobs", "enqueue", "j", "--input", "null", "--key", "k-"+tenant, "--tenant", tenant, "--json")
		expect(t, r, 0, "")
		var res jobs.EnqueueResult
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatal(err)
		}
		return res.RunID
	}
	mine, theirs := enqueue("TOA", "a"), enqueue("adm", "b")
	oneNote := func(what string, r result) {
		t.Helper()
		if strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "left out") || !strings.Contains(r.stderr, "X_FORBIDDEN") {
			t.Errorf("%s: stderr %q, want one line saying what was left out and why", what, r.stderr)
		}
	}

	r := as("TOA", "jobs", "ls")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, mine) || strings.Contains(r.stdout, theirs) || strings.Contains(r.stdout, "OLDEST READY") {
		t.Errorf("jobs ls as tenant a:\n%s", r.stdout)
	}
	oneNote("jobs ls", r)

	r = as("TOA", "jobs", "ls", "--json")
	expect(t, r, 0, "")
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("jobs ls --json: %v\n%s", err, r.stdout)
	}
	if _, ok := doc["queues"]; ok {
		t.Errorf("jobs ls --json shows queues it was refused: %s", r.stdout)
	}
	if _, ok := doc["backfills"]; ok {
		t.Errorf("jobs ls --json shows backfills it was refused: %s", r.stdout)
	}
	if !strings.Contains(string(doc["runs"]), mine) || strings.Contains(string(doc["runs"]), theirs) {
		t.Errorf("jobs ls --json runs: %s", doc["runs"])
	}
	oneNote("jobs ls --json", r)

	// The admin still sees every section, [] when empty, and no note.
	r = as("adm", "jobs", "ls", "--json")
	expect(t, r, 0, "")
	doc = nil
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc["queues"]), `"default"`) || string(doc["backfills"]) != "[]" || r.stderr != "" {
		t.Errorf("jobs ls --json as admin: %s\nstderr: %s", r.stdout, r.stderr)
	}

	r = as("TOA", "jobs", "show", mine)
	expect(t, r, 0, "")
	if !regexp.MustCompile(`Tenant\s+a\n`).MatchString(r.stdout) {
		t.Errorf("jobs show as tenant a:\n%s", r.stdout)
	}
	oneNote("jobs show", r)
	r = as("TOA", "jobs", "show", mine, "--json")
	expect(t, r, 0, "")
	var show struct {
		ID       string          `json:"id"`
		Backfill json.RawMessage `json:"backfill"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &show); err != nil || show.ID != mine || string(show.Backfill) != "null" {
		t.Errorf("jobs show --json as tenant a: %s (%v)", r.stdout, err)
	}
	oneNote("jobs show --json", r)
	expect(t, as("TOA", "jobs", "show", theirs), 1, "X_RUN_NOT_FOUND: ")
}
