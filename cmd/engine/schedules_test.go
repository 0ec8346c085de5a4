package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

type reportInput struct {
	Day string `json:"day"`
}

var reportJob = jobs.MustDefine("report", func(in reportInput) string { return in.Day }, jobs.NoTenant[reportInput](),
	func(_ *jobs.Ctx, in reportInput) (string, error) { return in.Day, nil })

func TestScheduleCommands(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	daily := scheduler.MustDefine("daily-report", reportJob, "0 6 * * *", "Europe/Berlin", reportInput{Day: "today"},
		scheduler.CatchUp(scheduler.RunAll))
	sc, err := scheduler.New(scheduler.Config{Engine: env.Engine, Schedules: scheduler.Static(daily), Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Stop(context.Background()) })
	if err := sc.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Scheduler: sc, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	o := &opsEnv{env: env, server: []string{"--server", ts.URL}}

	r := o.run(t, "schedules", "ls")
	expect(t, r, 0, "")
	for _, want := range []string{"daily-report", "0 6 * * *", "Europe/Berlin", "run-all", "false", "2026-01-06T06:00:00+01:00"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("schedules ls lacks %q:\n%s", want, r.stdout)
		}
	}
	r = o.run(t, "schedules", "ls", "--json")
	expect(t, r, 0, "")
	var list api.ScheduleList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Schedules) != 1 || len(list.Schedules[0].Next) != 5 ||
		list.Schedules[0].Checksum != daily.Checksum() {
		t.Fatalf("schedules ls --json: %v\n%s", err, r.stdout)
	}
	r = o.run(t, "schedules", "show", "daily-report")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "next fires") || !strings.Contains(r.stdout, daily.Checksum()) {
		t.Errorf("schedules show:\n%s", r.stdout)
	}
	expect(t, o.run(t, "schedules", "show", "nope"), 1, "X_SCHEDULE_NOT_FOUND:")
	expect(t, o.run(t, "schedules", "show"), 2, "")

	r = o.run(t, "schedules", "pause", "daily-report")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "paused") {
		t.Errorf("pause: %s", r.stdout)
	}
	r = o.run(t, "schedules", "trigger", "daily-report", "--json")
	expect(t, r, 0, "")
	var res jobs.EnqueueResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.RunID == "" {
		t.Fatalf("trigger --json: %v\n%s", err, r.stdout)
	}
	run, err := env.Engine.GetRun(context.Background(), res.RunID)
	if err != nil || run.EnqueuedBy != "schedule:daily-report:manual" {
		t.Errorf("the triggered run %+v, %v", run, err)
	}
	r = o.run(t, "schedules", "resume", "daily-report")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "running") {
		t.Errorf("resume: %s", r.stdout)
	}
	env.Fake().Set(time.Date(2026, 1, 6, 5, 0, 0, 0, time.UTC))
	if err := sc.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	runs, _ := env.Engine.ListRuns(context.Background(), store.ListParams{Job: "report"})
	if len(runs) != 2 {
		t.Errorf("%d runs, want the trigger's and 06:00 Berlin's", len(runs))
	}

	// An engine without a scheduler says so.
	plain := setupOps(t)
	expect(t, plain.run(t, "schedules", "ls"), 1, "X_NO_SCHEDULER:")
}

// serve runs the scheduler unless --no-scheduler; it leads, and says so in /metrics.
func TestServeRunsTheScheduler(t *testing.T) {
	t.Parallel()
	for _, disabled := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		var stderr testenv.LogBuffer
		done := make(chan int, 1)
		args := []string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--database-url", ""}
		if disabled {
			args = append(args, "--no-scheduler")
		}
		go func() { done <- run(ctx, args, &bytes.Buffer{}, &stderr) }()
		addr := ""
		re := regexp.MustCompile(`jobs.api.listening addr=(\S+)`)
		for deadline := time.Now().Add(30 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if m := re.FindStringSubmatch(stderr.String()); m != nil {
				addr = m[1]
			}
		}
		if addr == "" {
			cancel()
			t.Fatalf("the engine did not start:\n%s", stderr.String())
		}
		r := runCmd(ctx, "schedules", "ls", "--json", "--server", addr)
		if disabled {
			expect(t, r, 1, "X_NO_SCHEDULER:")
		} else {
			expect(t, r, 0, "")
			if strings.TrimSpace(r.stdout) != "{\n  \"schedules\": []\n}" {
				t.Errorf("schedules ls --json of a served engine: %q", r.stdout)
			}
			if !waitMetric(t, "http://"+addr+"/metrics", "jobs_scheduler_leader 1") {
				t.Errorf("/metrics never showed the scheduler leading")
			}
		}
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Fatalf("serve exited %d:\n%s", code, stderr.String())
			}
		case <-time.After(15 * time.Second):
			t.Fatal("serve did not drain within 15s")
		}
		if released := strings.Contains(stderr.String(), "jobs.scheduler.released"); released == disabled {
			t.Errorf("disabled %v: the drain released a lease: %v\n%s", disabled, released, stderr.String())
		}
	}
}

func waitMetric(t *testing.T, url, line string) bool {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(url)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), line) {
			return true
		}
	}
	return false
}

// The serve's boolean variables are read as booleans, as $JOBS_DB_WRITE_IMPLIED_EVENTS is:
// JOBS_NO_SCHEDULER=false or 0 runs the scheduler (it was read as "set at all", which turned it
// off), JOBS_ALLOW_UNDECLARED=true allows (only "1" did), JOBS_LOG_RUNS=false stops the lines
// (only "0" did), and a value that is not a boolean is refused rather than read as either.
func TestServeEnvBooleans(t *testing.T) {
	for _, b := range []struct{ env, flag, unset string }{
		{"JOBS_NO_SCHEDULER", "no-scheduler", "false"},
		{"JOBS_ALLOW_UNDECLARED", "allow-undeclared", "false"},
		{"JOBS_LOG_RUNS", "log-runs", "true"},
	} {
		for v, want := range map[string]string{"false": "false", "0": "false", "f": "false", "true": "true", "1": "true", "TRUE": "true", "": b.unset} {
			t.Setenv(b.env, v)
			root := newRootCmd()
			serveCmd, _, err := root.Find([]string{"serve"})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []*cobra.Command{root, serveCmd} {
				if got := c.Flags().Lookup(b.flag).Value.String(); got != want {
					t.Errorf("%s=%q: %s --%s is %s, want %s", b.env, v, c.Name(), b.flag, got, want)
				}
			}
		}
		t.Setenv(b.env, "please")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		expect(t, runCmd(ctx, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--database-url", ""), 2,
			`X_BAD_REQUEST: $`+b.env+` "please": want true or false`)
		cancel()
		t.Setenv(b.env, "")
	}
}
