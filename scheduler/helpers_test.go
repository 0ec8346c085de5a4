package scheduler_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store"
)

type Ping struct {
	Note string `json:"note"`
}

var pingJob = jobs.MustDefine("ping", func(p Ping) string { return "ping:" + p.Note }, jobs.NoTenant[Ping](),
	func(_ *jobs.Ctx, p Ping) (string, error) { return p.Note, nil })

// t0 is testenv's default fake time.
var t0 = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

func define(t *testing.T, name, spec, tz string, opts ...scheduler.Option) scheduler.Schedule {
	t.Helper()
	s, err := scheduler.Define(name, pingJob, spec, tz, Ping{Note: name}, opts...)
	if err != nil {
		t.Fatalf("Define(%s): %v", name, err)
	}
	return s
}

// start builds a scheduler (not started: the test drives its rounds with Tick) over env's engine,
// stopped at cleanup.
func start(t *testing.T, env *testenv.Env, id string, ss ...scheduler.Schedule) *scheduler.Scheduler {
	t.Helper()
	s, err := scheduler.New(scheduler.Config{Engine: env.Engine, Schedules: scheduler.Static(ss...), ID: id, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Stop(ctx)
	})
	return s
}

func tick(t *testing.T, s *scheduler.Scheduler) {
	t.Helper()
	if err := s.Tick(context.Background()); err != nil {
		t.Fatalf("Tick(%s): %v", s.ID(), err)
	}
}

// fired returns the idempotency keys of the runs of the schedule, oldest first.
func fired(t *testing.T, env *testenv.Env, schedule string) []string {
	t.Helper()
	runs, err := env.Engine.ListRuns(context.Background(), store.ListParams{Job: "ping", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range runs {
		if r.EnqueuedBy == "schedule:"+schedule {
			keys = append(keys, r.Key)
		}
	}
	slices.Sort(keys)
	return keys
}

// keys are the occurrence keys of name at t0 plus each offset.
func keys(name string, offsets ...time.Duration) []string {
	var out []string
	for _, d := range offsets {
		out = append(out, scheduler.OccurrenceKey(name, t0.Add(d)))
	}
	slices.Sort(out)
	return out
}

func hours(from, to int) []time.Duration {
	var out []time.Duration
	for h := from; h <= to; h++ {
		out = append(out, time.Duration(h)*time.Hour)
	}
	return out
}

func wantFired(t *testing.T, env *testenv.Env, schedule string, want []string) {
	t.Helper()
	if got := fired(t, env, schedule); !slices.Equal(got, want) {
		t.Errorf("%s fired %v\nwant %v", schedule, got, want)
	}
}

func info(t *testing.T, s *scheduler.Scheduler, name string) scheduler.Info {
	t.Helper()
	in, err := s.Get(context.Background(), name)
	if err != nil {
		t.Fatalf("Get(%s): %v", name, err)
	}
	return in
}
