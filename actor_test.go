package jobs_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

type invite struct{ Org, Email string }

// Job.As(actor).Enqueue records the actor as the run's EnqueuedBy: in the run, in its
// RunStarted event, in the run view, and for the body (Ctx.Actor, jobs.ActorFrom in a step).
// The tenant stays the one the job derives from the input.
func TestActorIsRecordedAndSeenByTheBody(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	var seen, inStep atomic.Value
	job := jobs.MustDefine("invite", func(in invite) string { return in.Org + ":" + in.Email },
		jobs.TenantFrom(func(in invite) string { return in.Org }),
		func(c *jobs.Ctx, in invite) (string, error) {
			seen.Store(c.Actor())
			_, err := jobs.Step(c, "send", func(ctx context.Context) (bool, error) {
				a, _ := jobs.ActorFrom(ctx)
				inStep.Store(a)
				return true, nil
			})
			return "", err
		})
	env.Worker(worker.Config{}, job)
	res, err := job.As(jobs.Actor{EnqueuedBy: "user:42"}).Enqueue(t.Context(), env.Engine, invite{Org: "acme", Email: "a@b"})
	if err != nil {
		t.Fatal(err)
	}
	run := env.Await(res.RunID, store.StateCompleted)
	if run.EnqueuedBy != "user:42" || run.Tenant != "acme" {
		t.Errorf("run enqueued by %q, tenant %q; want user:42, acme", run.EnqueuedBy, run.Tenant)
	}
	want := jobs.Actor{Tenant: "acme", EnqueuedBy: "user:42"}
	if seen.Load() != want || inStep.Load() != want {
		t.Errorf("the body saw %+v, its step %+v; want %+v", seen.Load(), inStep.Load(), want)
	}
	view, err := env.Engine.InspectRun(t.Context(), res.RunID)
	if err != nil || view.EnqueuedBy != "user:42" {
		t.Errorf("run view enqueued by %q (%v)", view.EnqueuedBy, err)
	}
	if p, err := env.History(res.RunID)[0].Decode(); err != nil || p.(history.RunStarted).EnqueuedBy != "user:42" {
		t.Errorf("RunStarted %+v (%v) does not record the actor", p, err)
	}
	// The same tenant as the job derives is accepted (a body passing its own Ctx.Actor()).
	again, err := job.As(want).Enqueue(t.Context(), env.Engine, invite{Org: "acme", Email: "c@d"})
	if err != nil {
		t.Fatalf("enqueue as an actor of the run's own tenant: %v", err)
	}
	env.Await(again.RunID, store.StateCompleted)
	// A dedupe returns the live run as the first enqueuer made it.
	first, err := job.As(jobs.Actor{EnqueuedBy: "user:1"}).Enqueue(t.Context(), env.Engine, invite{Org: "acme", Email: "late"})
	if err != nil {
		t.Fatal(err)
	}
	dup, err := job.As(jobs.Actor{EnqueuedBy: "user:2"}).Enqueue(t.Context(), env.Engine, invite{Org: "acme", Email: "late"})
	if err != nil {
		t.Fatalf("second enqueue: %v", err)
	}
	if !dup.Deduped { // only a run that already finished frees its key
		if r, _ := env.Engine.GetRun(t.Context(), first.RunID); !r.State.Finished() || dup.RunID == first.RunID {
			t.Fatalf("second enqueue: %+v while the first run is %s", dup, r.State)
		}
	}
	if dup.Deduped {
		if r, _ := env.Engine.GetRun(t.Context(), first.RunID); r.EnqueuedBy != "user:1" {
			t.Errorf("deduped run enqueued by %q, want the first enqueuer", r.EnqueuedBy)
		}
	}
}

// An actor is attribution only: it never moves a run to another tenant, and an id no surface
// can show faithfully is refused. A refused enqueue creates nothing.
func TestActorRefusals(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	job := jobs.MustDefine("invite", func(in invite) string { return in.Org + ":" + in.Email },
		jobs.TenantFrom(func(in invite) string { return in.Org }),
		func(c *jobs.Ctx, in invite) (string, error) { return "", nil })
	in := invite{Org: "acme", Email: "x"}
	for name, actor := range map[string]jobs.Actor{
		"no id":             {},
		"another tenant":    {EnqueuedBy: "user:42", Tenant: "globex"},
		"control character": {EnqueuedBy: "user:42\n[ok] admin"},
		"escape sequence":   {EnqueuedBy: "user:\x1b[2J"},
		"invalid UTF-8":     {EnqueuedBy: "user:\xff"},
		"NUL":               {EnqueuedBy: "user:\x00"},
		"too long":          {EnqueuedBy: strings.Repeat("u", 1001)},
	} {
		_, err := job.As(actor).Enqueue(t.Context(), env.Engine, in)
		if jobs.CodeOf(err) != jobs.CodeActorInvalid {
			t.Errorf("%s: %v, want X_ACTOR_INVALID", name, err)
		}
	}
	// The untyped request is held to the same rule by the engine.
	_, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "invite", Key: "k", Tenant: "acme", EnqueuedBy: "a\tb"})
	if jobs.CodeOf(err) != jobs.CodeActorInvalid {
		t.Errorf("untyped enqueue with a control character: %v, want X_ACTOR_INVALID", err)
	}
	runs, err := env.Engine.ListRuns(t.Context(), store.ListParams{})
	if err != nil || len(runs) != 0 {
		t.Errorf("%d runs after refused enqueues (%v), want none", len(runs), err)
	}
	// A NoTenant job: an actor naming any tenant is refused.
	free := jobs.MustDefine("free", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) { return s, nil })
	if _, err := free.As(jobs.Actor{EnqueuedBy: "u", Tenant: "acme"}).Request("x"); jobs.CodeOf(err) != jobs.CodeActorInvalid {
		t.Errorf("tenant on a NoTenant job: %v, want X_ACTOR_INVALID", err)
	}
}
