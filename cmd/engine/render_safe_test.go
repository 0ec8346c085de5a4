package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/termtext"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// assertSafe fails unless out holds nothing a terminal would act on or a table would break on:
// no control character but the lines' own newlines, no bidi control or line separator, no byte
// that is not UTF-8.
func assertSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s prints invalid UTF-8:\n%q", what, out)
	}
	for _, r := range out {
		if r != '\n' && termtext.Hidden(r) {
			t.Errorf("%s prints %U raw:\n%q", what, r, out)
			return
		}
	}
}

// Untrusted text (a key, tenant, job, queue, step name, actor, reason or error holding ESC,
// newlines, tabs, C1 or bidi controls) reaches no table raw: every listing and header block
// shows it escaped, the columns hold, long identifiers are clipped in listings; --json keeps the
// exact values.
func TestTablesEscapeUntrustedText(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	ctx := context.Background()
	const (
		job    = "bad\x1b[31mjob"
		queue  = "q\tueue\u202e"
		step   = "st\x1b]0;pwned\x07ep"
		failed = "declined\x1b[2J\nsecond line\u0085\u202e"
	)
	tenant := "t\u009b31m" + strings.Repeat("t", 100)
	key := "key\n\x1b[1m" + strings.Repeat("k", 100)

	// A plain enqueue with every identifier tainted.
	input, err := jobs.Encode(map[string]string{"x": "\u202egnp.exe"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := o.env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: job, Queue: queue, Key: key, Tenant: tenant, Input: input})
	if err != nil {
		t.Fatal(err)
	}
	ready := res.RunID

	// A run that records a step and fails terminally, then is retried by a tainted actor.
	def := jobs.MustDefine("fails\x1b[5m", func(string) string { return "f" }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, _ string) (string, error) {
			if _, err := jobs.Step(c, step, func(context.Context) (string, error) { return "out\u202eput", nil }); err != nil {
				return "", err
			}
			return "", jobs.Errorf(jobs.CodeBadRequest, "%s", failed)
		}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
	o.env.Worker(worker.Config{}, def)
	fr, err := def.Enqueue(ctx, o.env.Engine, "x")
	if err != nil {
		t.Fatal(err)
	}
	o.env.Await(fr.RunID, store.StateFailed)
	expect(t, o.run(t, "jobs", "retry", fr.RunID, "--by", "ops\x1b[2J", "--reason", "why\x1b[5m\tnot"), 0, "")
	o.env.Await(fr.RunID, store.StateFailed)

	r := o.run(t, "jobs", "ls")
	expect(t, r, 0, "")
	assertSafe(t, "jobs ls", r.stdout)
	for _, want := range []string{`bad\x1b[31mjob`, `q\tueue\u202e`, `t\u009b31m`, "…"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("jobs ls lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, strings.Repeat("t", 100)) {
		t.Errorf("jobs ls does not clip a long tenant:\n%s", r.stdout)
	}
	// The columns hold: each run is one row, its id first.
	rows := 0
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, ready) || strings.HasPrefix(l, fr.RunID) {
			rows++
		}
	}
	if rows != 2 {
		t.Errorf("jobs ls: %d rows start with a run id, want 2:\n%s", rows, r.stdout)
	}

	// --json is unchanged: the exact values.
	r = o.run(t, "jobs", "ls", "--json")
	expect(t, r, 0, "")
	var ls struct {
		Runs []engine.RunSummary `json:"runs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ls); err != nil {
		t.Fatal(err)
	}
	var got engine.RunSummary
	for _, run := range ls.Runs {
		if run.ID == ready {
			got = run
		}
	}
	if got.Job != job || got.Queue != queue || got.Tenant != tenant {
		t.Errorf("jobs ls --json changed the values: %+v", got)
	}

	// jobs show: the header block prints the run's own fields whole, escaped.
	r = o.run(t, "jobs", "show", ready)
	expect(t, r, 0, "")
	assertSafe(t, "jobs show", r.stdout)
	for _, want := range []string{`key\n\x1b[1m` + strings.Repeat("k", 100), `t\u009b31m` + strings.Repeat("t", 100), `\u202egnp.exe`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("jobs show lacks %q whole:\n%s", want, r.stdout)
		}
	}
	r = o.run(t, "jobs", "show", fr.RunID)
	expect(t, r, 0, "")
	assertSafe(t, "jobs show (failed, retried)", r.stdout)
	for _, want := range []string{`st\x1b]0;pwned\aep`, `declined\x1b[2J second line \u202e`, `ops\x1b[2J`, `why\x1b[5m not`, `out\u202eput`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("jobs show lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "Error ") && !strings.Contains(l, "second line") {
			t.Errorf("the Error row is broken across lines:\n%s", r.stdout)
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dead-letters"}, `fails\x1b[5m`},
		{[]string{"dead-letters", "--full"}, `declined\x1b[2J second line \u202e`},
		{[]string{"overview"}, `q\tueue\u202e`},
		{[]string{"history", "dump", fr.RunID, "--format", "table"}, `st\x1b]0;pwned\aep`},
	} {
		r = o.run(t, tc.args...)
		expect(t, r, 0, "")
		assertSafe(t, strings.Join(tc.args, " "), r.stdout)
		if !strings.Contains(r.stdout, tc.want) {
			t.Errorf("%s lacks %q:\n%s", strings.Join(tc.args, " "), tc.want, r.stdout)
		}
	}
	r = o.run(t, "history", "dump", fr.RunID)
	if !strings.Contains(r.stdout, `st\u001b]0;pwned\u0007ep`) {
		t.Errorf("history dump (jsonl) changed the step's name:\n%s", r.stdout)
	}

	// The manifest, with a worker and declarations named to break it.
	reg, err := jobs.NewRegistry(def)
	if err != nil {
		t.Fatal(err)
	}
	decls, err := reg.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.env.Engine.DeclareManifest(ctx, frontendManifest("worker\x1b[8m", []string{queue}, decls)); err != nil {
		t.Fatal(err)
	}
	r = o.run(t, "manifest")
	expect(t, r, 0, "")
	assertSafe(t, "manifest", r.stdout)
	if !strings.Contains(r.stdout, `worker\x1b[8m`) || !strings.Contains(r.stdout, `fails\x1b[5m`) {
		t.Errorf("manifest:\n%s", r.stdout)
	}
}

// The tables without a CLI command in the test above: the backfill ledger, schedules and a
// retention report.
func TestTablesEscapeUntrustedTextOffline(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	name := "bf\x1b[31m" + strings.Repeat("n", 60)
	var b bytes.Buffer
	left := int64(3)
	p := backfill.Progress{BackfillRow: frontend.BackfillRow{Name: name, RunID: "r", Cursor: `["a\u202eb"]`, StartedAt: now,
		Checksum: "c\x1b", Error: "e\x1b[1m\nmore"}, Status: "running\x1b[0m", Left: &left}
	if err := printBackfills(&b, now, []backfill.Progress{p}); err != nil {
		t.Fatal(err)
	}
	if err := printRunBackfill(&b, &p); err != nil {
		t.Fatal(err)
	}
	sched := scheduler.Info{Schedule: scheduler.Schedule{Name: "nightly\x1b[2J", Spec: "0 3 * * *\n", TZ: "Europe/Berlin\u202e",
		Job: "j\x1b", Queue: "q\x07", Policy: "skip"}, Checksum: "x\x1b"}
	broken := scheduler.Info{Schedule: scheduler.Schedule{Name: "broken\x1b"}, Error: "bad spec\x1b[1m\nreally"}
	if err := printSchedules(&b, now, []scheduler.Info{sched, broken}); err != nil {
		t.Fatal(err)
	}
	if err := printSchedule(&b, now, sched); err != nil {
		t.Fatal(err)
	}
	printRetention(&b, engine.RetentionReport{Runs: 1, ByState: map[string]int{"completed\x1b": 1},
		Oldest: []engine.RetainedRun{{ID: "r", Job: "j\x1b[1m", State: "completed", FinishedAt: now}}})
	printDryRun(&b, dryRun{Name: name, Message: "refused\x1b[1m\nbecause"}, false)
	out := b.String()
	assertSafe(t, "the backfill, schedule and retention tables", out)
	if strings.Contains(out, strings.Repeat("n", 60)+" ") && !strings.Contains(out, "…") {
		t.Errorf("a long backfill name is not clipped in the ledger's table:\n%s", out)
	}
	for _, want := range []string{`bf\x1b[31m`, `nightly\x1b[2J`, `Europe/Berlin\u202e`, `j\x1b[1m`, `refused\x1b[1m because`} {
		if !strings.Contains(out, want) {
			t.Errorf("the tables lack %q:\n%s", want, out)
		}
	}
}
