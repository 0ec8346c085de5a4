package main

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// `engine jobs retry ID --from-step NAME` reopens a dead-lettered run from that step: the steps
// before it keep their recorded results and do not run again (a charge made before the failure
// is not made twice), NAME and the steps after it run again. An unknown step is refused and
// changes nothing.
func TestRetryFromStepCommand(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	var charge, ship, notify atomic.Int32
	j := jobs.MustDefine("fulfil", func(int) string { return "order-1" }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, in int) (int, error) {
			if _, err := jobs.Step(c, "charge", func(context.Context) (int32, error) { return charge.Add(1), nil }); err != nil {
				return 0, err
			}
			if _, err := jobs.Step(c, "ship", func(context.Context) (int32, error) { return ship.Add(1), nil }); err != nil {
				return 0, err
			}
			return jobs.Step(c, "notify", func(context.Context) (int, error) {
				if notify.Add(1) == 1 {
					return 0, jobs.Errorf("X_MAILER_DOWN", "mailer down")
				}
				return in, nil
			})
		}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
	o.env.Worker(worker.Config{}, j)
	res, err := j.Enqueue(context.Background(), o.env.Engine, 1)
	if err != nil {
		t.Fatal(err)
	}
	o.env.Await(res.RunID, store.StateFailed)

	expect(t, o.run(t, "jobs", "retry", res.RunID, "--from-step", "nope", "--reason", "typo"), 1, "X_STEP_NOT_FOUND: ")
	if v, err := o.env.Engine.InspectRun(context.Background(), res.RunID); err != nil || v.State != store.StateFailed || len(v.Retries) != 0 {
		t.Fatalf("a refused retry changed the run: %v %+v (%v)", v.State, v.Retries, err)
	}
	r := o.run(t, "jobs", "retry", res.RunID, "--from-step", "ship", "--reason", "mailer back", "--by", "ops@acme")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, res.RunID) || !strings.Contains(r.stdout, "from step ship") {
		t.Fatalf("retry printed %q", r.stdout)
	}
	o.env.Await(res.RunID, store.StateCompleted)
	if v, err := o.env.Engine.InspectRun(context.Background(), res.RunID); err != nil || len(v.Retries) != 1 ||
		v.Retries[0].FromStep != "ship" || v.Retries[0].By != "ops@acme" || v.Retries[0].Reason != "mailer back" {
		t.Fatalf("the retry's audit %+v (%v)", v.Retries, err)
	}
	if charge.Load() != 1 || ship.Load() != 2 || notify.Load() != 2 {
		t.Fatalf("charge=%d ship=%d notify=%d; want charge kept (1), ship and notify run again (2)",
			charge.Load(), ship.Load(), notify.Load())
	}
}
