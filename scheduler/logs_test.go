package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store/memory"
)

// A leader's clean stop hands its lease back and says so at info; "demoted", a warning, is for a
// leader that lost its lease, and a clean stop is not that.
func TestACleanStopIsNotADemotion(t *testing.T) {
	t.Parallel()
	logs := &testenv.LogBuffer{}
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Logger: logs.Logger()})
	s, err := scheduler.New(scheduler.Config{Engine: env.Engine, ID: "a", Logger: logs.Logger(),
		Schedules: scheduler.Static(define(t, "hourly", "0 * * * *", "UTC"))})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, s)
	if !s.Leading() {
		t.Fatal("the only scheduler does not lead")
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "jobs.scheduler.released") || strings.Contains(out, "jobs.scheduler.demoted") {
		t.Fatalf("a clean stop logged:\n%s", out)
	}
}

// An occurrence whose key a run enqueued by someone else already holds creates no run: the
// scheduler says so, naming that run.
func TestAnOccurrenceWhoseKeyIsHeldIsReported(t *testing.T) {
	t.Parallel()
	logs := &testenv.LogBuffer{}
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Logger: logs.Logger()})
	env.Fake().Set(t0)
	s, err := scheduler.New(scheduler.Config{Engine: env.Engine, ID: "a", Logger: logs.Logger(),
		Schedules: scheduler.Static(define(t, "hourly", "0 * * * *", "UTC"))})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, s) // first seen: the watermark is now
	req, err := pingJob.Request(Ping{Note: "squat"})
	if err != nil {
		t.Fatal(err)
	}
	req.Key, req.EnqueuedBy = scheduler.OccurrenceKey("hourly", t0.Add(time.Hour)), "user:mallory"
	squat, err := env.Engine.Enqueue(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	env.Fake().Set(t0.Add(time.Hour))
	tick(t, s)
	if out := logs.String(); !strings.Contains(out, "jobs.scheduler.key-held") || !strings.Contains(out, squat.RunID) {
		t.Fatalf("the held occurrence is not reported:\n%s", out)
	}
}
