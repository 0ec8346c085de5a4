package api_test

import (
	"context"
	"io"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/scheduler"
)

// A run id or schedule name "." or ".." reaches its own route as a name that does not exist,
// not the route the path would resolve to as a dot segment: reading run "." is X_RUN_NOT_FOUND,
// never the run listing decoded as an empty run, and a schedule ".." is X_SCHEDULE_NOT_FOUND,
// never an unknown route.
func TestDotSegmentsAreNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, api.Config{})
	sc, err := scheduler.New(scheduler.Config{Engine: b.env.Engine, Schedules: scheduler.Static(), Logger: b.env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Stop(context.Background()) })
	srv, err := api.NewServer(api.Config{Engine: b.env.Engine, Scheduler: sc, Logger: b.env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	c := serveClient(t, srv)
	want := func(what string, err error, code jobs.Code) {
		t.Helper()
		if !jobs.HasCode(err, code) {
			t.Errorf("%s: %v, want %s", what, err, code)
		}
	}
	for _, n := range []string{".", ".."} {
		_, err := c.GetRun(ctx, n)
		want("GetRun("+n+")", err, jobs.CodeRunNotFound)
		_, err = c.Cancel(ctx, n, "r")
		want("Cancel("+n+")", err, jobs.CodeRunNotFound)
		_, err = c.Retry(ctx, engine.RetryRequest{RunID: n})
		want("Retry("+n+")", err, jobs.CodeRunNotFound)
		want("DumpHistory("+n+")", c.DumpHistory(ctx, n, io.Discard), jobs.CodeRunNotFound)
		_, err = c.Schedule(ctx, n)
		want("Schedule("+n+")", err, jobs.CodeScheduleNotFound)
		_, err = c.PauseSchedule(ctx, n)
		want("PauseSchedule("+n+")", err, jobs.CodeScheduleNotFound)
		_, err = c.TriggerSchedule(ctx, n)
		want("TriggerSchedule("+n+")", err, jobs.CodeScheduleNotFound)
	}
}
