package main

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
)

// jobs show prints who enqueued a run and the trace it was enqueued under, in both formats.
func TestShowActorAndTrace(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	job := jobs.MustDefine("invite", func(s string) string { return s }, jobs.TenantFrom(func(s string) string { return "acme" }),
		func(c *jobs.Ctx, s string) (string, error) { return s, nil })
	req, err := job.As(jobs.Actor{EnqueuedBy: "user:42"}).Request("x")
	if err != nil {
		t.Fatal(err)
	}
	req.TraceParent = tp
	res, err := o.env.Engine.Enqueue(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	r := o.run(t, "jobs", "show", res.RunID)
	expect(t, r, 0, "")
	if !regexp.MustCompile(`Enqueued\s+.* by user:42\n`).MatchString(r.stdout) ||
		!regexp.MustCompile(`Trace\s+4bf92f3577b34da6a3ce929d0e0e4736\n`).MatchString(r.stdout) {
		t.Fatalf("show printed\n%s", r.stdout)
	}
	r = o.run(t, "jobs", "show", res.RunID, "--json")
	expect(t, r, 0, "")
	var v engine.RunView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.EnqueuedBy != "user:42" ||
		v.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || v.TraceParent != tp || v.Tenant != "acme" {
		t.Fatalf("show --json printed %q (%v)", r.stdout, err)
	}
}

// jobs enqueue --traceparent (default $TRACEPARENT) stamps the run; --by records the actor, and
// an actor holding a control character is refused.
func TestEnqueueWithTraceparentAndBy(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	r := o.run(t, "jobs", "enqueue", "j", "--input", "null", "--key", "k", "--no-tenant", "--by", "ci:deploy-7", "--traceparent", tp, "--json")
	expect(t, r, 0, "")
	var res jobs.EnqueueResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatal(err)
	}
	run, err := o.env.Engine.GetRun(t.Context(), res.RunID)
	if err != nil || run.TraceParent != tp || run.EnqueuedBy != "ci:deploy-7" {
		t.Fatalf("run %+v (%v): want the flag's trace and actor", run, err)
	}
	expect(t, o.run(t, "jobs", "enqueue", "j", "--input", "null", "--key", "k2", "--no-tenant", "--by", "ci\x1b[2J"), 1, "X_ACTOR_INVALID: ")
}
