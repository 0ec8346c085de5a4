package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/examples"
	"github.com/ultimat3/jobs/store/memory"
)

// An engine served over HTTP, and a client of it: a typed enqueue, an inspection, and a refusal
// whose code survives the trip.
func ExampleNewClient() {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// No worker has started yet, so the engine is told to accept jobs none has declared.
	eng, err := engine.New(engine.Config{Store: memory.New(), Logger: quiet, AllowUndeclared: true})
	if err != nil {
		panic(err)
	}
	if err := eng.Start(ctx); err != nil {
		panic(err)
	}
	defer eng.Stop(ctx)

	srv, err := api.NewServer(api.Config{Engine: eng, Token: "s3cret", Logger: quiet})
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(srv) // in production: srv.Start(ctx), or api.Module
	defer ts.Close()
	defer srv.Drain()

	c, err := api.NewClient(ts.URL, "s3cret")
	if err != nil {
		panic(err)
	}
	defer c.Close()

	res, err := examples.Onboarding.Enqueue(ctx, c, examples.OnboardingInput{OrgID: "acme"})
	if err != nil {
		panic(err)
	}
	run, err := c.GetRun(ctx, res.RunID)
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Job, run.State, run.Tenant, string(run.Input))

	_, err = c.Cancel(ctx, "no-such-run", "")
	fmt.Println(jobs.HasCode(err, jobs.CodeRunNotFound), api.StatusOf(jobs.CodeOf(err)))
	// Output:
	// onboard-org ready acme {"orgId":"acme"}
	// true 404
}
