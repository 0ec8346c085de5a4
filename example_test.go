package jobs_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

type Signup struct {
	OrgID string `json:"orgId"`
}

type PlanChosen struct {
	OrgID string `json:"orgId"`
	Plan  string `json:"plan"`
}

// A job is a plain Go function. Its idempotency key and its tenant are required arguments of
// Define; every Step's result, the sleep and the event wait are recorded in the run's history.
var Onboard = jobs.MustDefine("onboard-org",
	func(in Signup) string { return "onboard:" + in.OrgID },
	jobs.TenantFrom(func(in Signup) string { return in.OrgID }),
	func(ctx *jobs.Ctx, in Signup) (string, error) {
		db, err := jobs.Step(ctx, "provision", func(ctx context.Context) (string, error) {
			return "db-" + in.OrgID, nil // runs once ever, even across crashes and deploys
		})
		if err != nil {
			return "", err
		}
		if err := jobs.Sleep(ctx, "grace-period", 72*time.Hour); err != nil { // holds no worker while asleep
			return "", err
		}
		plan, ok, err := jobs.WaitForEvent[PlanChosen](ctx, "plan", "plan.chosen", jobs.Match{"orgId": in.OrgID}, 14*24*time.Hour)
		if err != nil || !ok {
			return "", err
		}
		return jobs.Step(ctx, "welcome", func(ctx context.Context) (string, error) {
			return fmt.Sprintf("welcome %s: %s plan on %s", in.OrgID, plan.Plan, db), nil
		})
	},
	jobs.Retry(jobs.RetryPolicy{Attempts: 5, Backoff: jobs.Exponential, Delay: time.Second}),
)

func Example() {
	ctx := context.Background()
	// A fake clock lets this example sleep three days in no time; production uses the default.
	clk := clock.NewFake(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	eng, _ := engine.New(engine.Config{Store: memory.New(), Clock: clk})
	_ = eng.Start(ctx)
	defer eng.Stop(ctx)

	reg, _ := jobs.NewRegistry(Onboard)
	w, _ := worker.New(worker.Config{Frontend: eng, Registry: reg, Clock: clk})
	_ = w.Start(ctx)
	defer w.Stop(ctx)

	run, _ := Onboard.Enqueue(ctx, eng, Signup{OrgID: "acme"})
	again, _ := Onboard.Enqueue(ctx, eng, Signup{OrgID: "acme"})
	fmt.Println("deduped:", again.Deduped, again.RunID == run.RunID)

	waitFor(eng, run.RunID, store.StateSuspended) // asleep for three days
	clk.Advance(72 * time.Hour)
	eng.Tick(ctx)
	waitFor(eng, run.RunID, store.StateSuspended) // now waiting for the plan
	_, _ = eng.Publish(ctx, "plan.chosen", PlanChosen{OrgID: "acme", Plan: "pro"})

	done := waitFor(eng, run.RunID, store.StateCompleted)
	fmt.Println(done.State)
	view, _ := eng.InspectRun(ctx, run.RunID)
	for _, s := range view.Steps {
		fmt.Println(s.Kind, s.Name, s.Status)
	}
	// Output:
	// deduped: true true
	// completed
	// step provision completed
	// sleep grace-period woke
	// wait plan received
	// step welcome completed
}

// waitFor polls until the run reaches state (an app would watch a dashboard or an event).
func waitFor(eng *engine.Engine, id string, state store.State) store.Run {
	for {
		if run, _ := eng.GetRun(context.Background(), id); run.State == state {
			return run
		}
		time.Sleep(5 * time.Millisecond)
	}
}
