package testenv

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// OpsInput and OpsOutput are the input and result of the operator fixture's jobs.
type (
	OpsInput struct {
		Name string `json:"name"`
	}
	OpsOutput struct {
		Greeting string `json:"greeting"`
	}
)

// Ops is an engine on a real clock with a worker and runs in several states, for the tests of
// the operator's surfaces (package client, package mcp): the same data behind each surface.
type Ops struct {
	*Env
	// Greet completes ("hello" step, result {"greeting": "hi <name>"}), on the default queue.
	// Flaky runs step "prepare" then "charge", which fails (one attempt: dead-lettered) until
	// Fixed is set; it is on queue "payments". Waiter waits for the event "approved" whose
	// "name" is its input's name, for an hour, and returns the event's payload.
	Greet, Flaky, Waiter *jobs.Job[OpsInput, OpsOutput]
	Fixed                *atomic.Bool
	// Charges counts the executions of Flaky's "charge" step body.
	Charges *atomic.Int64
	// Completed, Failed, Suspended and Cancelled are runs in those states.
	Completed, Failed, Suspended, Cancelled string
}

// ErrDeclined is what Flaky's "charge" step fails with until Fixed.
var ErrDeclined = errors.New("card declined")

// StartOps starts the fixture over st: the engine, a worker hosting the three jobs, and one run
// in each of the states completed, failed, suspended and cancelled.
func StartOps(t testing.TB, st store.Store) *Ops {
	t.Helper()
	o := &Ops{Env: Start(t, Options{Store: st, Clock: clock.Real{}}), Fixed: &atomic.Bool{}, Charges: &atomic.Int64{}}
	key := func(in OpsInput) string { return in.Name }
	o.Greet = jobs.MustDefine("ops-greet", key, jobs.NoTenant[OpsInput](), func(c *jobs.Ctx, in OpsInput) (OpsOutput, error) {
		g, err := jobs.Step(c, "hello", func(context.Context) (string, error) { return "hi " + in.Name, nil })
		return OpsOutput{Greeting: g}, err
	})
	o.Flaky = jobs.MustDefine("ops-flaky", key, jobs.NoTenant[OpsInput](), func(c *jobs.Ctx, in OpsInput) (OpsOutput, error) {
		if _, err := jobs.Step(c, "prepare", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return OpsOutput{}, err
		}
		g, err := jobs.Step(c, "charge", func(context.Context) (string, error) {
			o.Charges.Add(1)
			if !o.Fixed.Load() {
				return "", ErrDeclined
			}
			return "charged " + in.Name, nil
		})
		return OpsOutput{Greeting: g}, err
	}, jobs.Queue("payments"), jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
	o.Waiter = jobs.MustDefine("ops-waiter", key, jobs.NoTenant[OpsInput](), func(c *jobs.Ctx, in OpsInput) (OpsOutput, error) {
		p, _, err := jobs.WaitForEvent[OpsOutput](c, "approval", "approved", jobs.Match{"name": in.Name}, time.Hour)
		return p, err
	})
	o.Worker(worker.Config{PollWait: 100 * time.Millisecond}, o.Greet, o.Flaky, o.Waiter)
	ctx := context.Background()
	enqueue := func(j *jobs.Job[OpsInput, OpsOutput], name string) string {
		t.Helper()
		res, err := j.Enqueue(ctx, o.Engine, OpsInput{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return res.RunID
	}
	o.Completed = enqueue(o.Greet, "ada")
	o.Failed = enqueue(o.Flaky, "bob")
	o.Suspended = enqueue(o.Waiter, "cy")
	o.Cancelled = enqueue(o.Waiter, "dee")
	o.Await(o.Completed, store.StateCompleted)
	o.Await(o.Failed, store.StateFailed)
	o.Await(o.Suspended, store.StateSuspended)
	o.Await(o.Cancelled, store.StateSuspended)
	if _, err := o.Engine.Cancel(ctx, o.Cancelled, "no longer needed"); err != nil {
		t.Fatal(err)
	}
	return o
}
