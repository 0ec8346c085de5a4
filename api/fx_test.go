package api_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/examples"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// TestModulesWireOneApp builds the three services as one fx app (engine, API and an in-process
// worker), runs an onboarding through the HTTP API, and checks that stopping the app closes the
// listener and drains the worker.
func TestModulesWireOneApp(t *testing.T) {
	t.Parallel()
	var (
		srv *api.Server
		w   *worker.Worker
	)
	onboarding := examples.NewOnboarding(10*time.Millisecond, time.Minute)
	app := fxtest.New(t,
		fx.NopLogger,
		fx.Supply(testenv.Logger()),
		fx.Provide(func() store.Store { return memory.New() }),
		fx.Supply(engine.Config{PollFallback: 20 * time.Millisecond}),
		engine.Module,
		fx.Supply(api.Config{Addr: "127.0.0.1:0", Token: "t"}),
		api.Module,
		fx.Provide(func() (*jobs.Registry, error) { return jobs.NewRegistry(onboarding) }),
		// One registry for the app: the worker's counters are served by the API's /metrics.
		fx.Provide(func() *prometheus.Registry { return prometheus.NewRegistry() }),
		fx.Provide(func(r *prometheus.Registry) prometheus.Registerer { return r }),
		fx.Provide(func(r *prometheus.Registry) prometheus.Gatherer { return r }),
		fx.Supply(worker.Config{PollWait: time.Second}),
		worker.Module,
		fx.Populate(&srv, &w),
	)
	app.RequireStart()
	stopped := false
	defer func() {
		if !stopped {
			app.RequireStop()
		}
	}()

	base := "http://" + srv.Addr()
	c, err := api.NewClient(base, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	res, err := onboarding.Enqueue(ctx, c, examples.OnboardingInput{OrgID: "fx"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		v, err := c.GetRun(ctx, res.RunID)
		return err == nil && len(v.Steps) == 4 && v.Steps[3].Status == "waiting"
	})
	if _, err := c.Publish(ctx, "plan.chosen", examples.PlanChosen{OrgID: "fx", Plan: "team"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		v, err := c.GetRun(ctx, res.RunID)
		return err == nil && v.State == store.StateCompleted
	})

	// The run reads completed as soon as its final record commits; the engine's and the worker's
	// counters move just after (the worker's once the completion's answer reaches it), so the
	// scrape waits for them rather than racing them.
	wants := []string{`jobs_total{outcome="completed",queue="default",source="engine"} 1`, `jobs_total{outcome="completed",queue="default",source="worker"} 1`, `queue_depth{queue="default"} 0`}
	var body string
	scrape := func() bool {
		req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer t")
		res2, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(res2.Body)
		res2.Body.Close()
		body = string(b)
		for _, want := range wants {
			if !strings.Contains(body, want) {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(5 * time.Second)
	for !scrape() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for _, want := range wants {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	app.RequireStop()
	stopped = true
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("the API still answers after the app stopped")
	}
	if w.Parked() != 0 {
		t.Fatalf("%d runs still parked after the worker drained", w.Parked())
	}
}
