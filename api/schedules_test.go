package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store"
)

type tickInput struct {
	N int `json:"n"`
}

var tickJob = jobs.MustDefine("tick", func(in tickInput) string { return "tick" }, jobs.NoTenant[tickInput](),
	func(_ *jobs.Ctx, in tickInput) (int, error) { return in.N, nil })

func TestScheduleRoutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, api.Config{})
	hourly := scheduler.MustDefine("hourly", tickJob, "0 * * * *", "America/New_York", tickInput{N: 1})
	sc, err := scheduler.New(scheduler.Config{Engine: b.env.Engine, Schedules: scheduler.Static(hourly), Logger: b.env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Stop(context.Background()) })
	// The same engine behind a second server that has the scheduler.
	srv, err := api.NewServer(api.Config{Engine: b.env.Engine, Scheduler: sc, Logger: b.env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	c := serveClient(t, srv)

	// Without a scheduler: X_NO_SCHEDULER, 404.
	if _, err := b.client.Schedules(ctx); !jobs.HasCode(err, jobs.CodeNoScheduler) {
		t.Errorf("Schedules without a scheduler: %v", err)
	}
	if st := status(t, b.url+"/v1/schedules/hourly/trigger", http.MethodPost); st != http.StatusNotFound {
		t.Errorf("trigger without a scheduler: %d, want 404", st)
	}

	if err := sc.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	all, err := c.Schedules(ctx)
	if err != nil || len(all) != 1 || all[0].Name != "hourly" || all[0].TZ != "America/New_York" || len(all[0].Next) != 5 {
		t.Fatalf("Schedules = %+v, %v", all, err)
	}
	if _, err := c.Schedule(ctx, "nope"); !jobs.HasCode(err, jobs.CodeScheduleNotFound) {
		t.Errorf("an unknown schedule: %v", err)
	}
	if _, err := c.Schedule(ctx, "bad\x00name"); !jobs.HasCode(err, jobs.CodeBadRequest) {
		t.Errorf("a name with NUL: %v", err)
	}
	in, err := c.PauseSchedule(ctx, "hourly")
	if err != nil || !in.Paused {
		t.Fatalf("pause = %+v, %v", in, err)
	}
	if in, err := c.Schedule(ctx, "hourly"); err != nil || !in.Paused {
		t.Errorf("show after pause = %+v, %v", in, err)
	}
	res, err := c.TriggerSchedule(ctx, "hourly")
	if err != nil || res.RunID == "" {
		t.Fatalf("trigger = %+v, %v", res, err)
	}
	run, err := b.env.Engine.GetRun(ctx, res.RunID)
	if err != nil || !strings.HasPrefix(run.Key, "hourly@manual@") || run.Job != "tick" {
		t.Errorf("the triggered run %+v, %v", run, err)
	}
	if in, err := c.ResumeSchedule(ctx, "hourly"); err != nil || in.Paused {
		t.Errorf("resume = %+v, %v", in, err)
	}
	b.env.Fake().Advance(time.Hour)
	if err := sc.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	runs, _ := b.env.Engine.ListRuns(ctx, store.ListParams{Job: "tick"})
	if len(runs) != 2 {
		t.Errorf("%d runs after the trigger and an hour, want 2", len(runs))
	}
}

// serveClient serves srv with httptest and returns a client of it.
func serveClient(t *testing.T, srv *api.Server) *api.Client {
	t.Helper()
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	c, err := api.NewClient(ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// status sends an empty JSON request and returns the answer's status.
func status(t *testing.T, url, method string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
