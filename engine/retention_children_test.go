package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// A dead letter is kept a month so that an operator may retry it, and a retried parent may still
// wait for a child it started before it failed: the child, which finished long ago, is answered
// from its row. So a failed parent's finished child is kept like a live parent's, past its own
// week, and the retried parent gets the child's result, not X_RUN_NOT_FOUND. Once the parent
// ends for good (completed here), the child goes like any run.
func TestRetentionKeepsTheChildOfADeadLetterParent(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t, testenv.Options{Store: b.Open(t),
				Retention: engine.RetentionConfig{Every: 1000 * time.Hour}})
			ctx := context.Background()
			var fixed atomic.Bool
			kid := jobs.MustDefine("retkid", func(s string) string { return "retkid:" + s }, jobs.NoTenant[string](),
				func(_ *jobs.Ctx, s string) (string, error) { return "kid " + s, nil })
			parent := jobs.MustDefine("retparent", func(s string) string { return "retparent:" + s }, jobs.NoTenant[string](),
				func(c *jobs.Ctx, s string) (string, error) {
					h, err := kid.StartChild(c, "kid", s)
					if err != nil {
						return "", err
					}
					if _, err := jobs.Step(c, "gate", func(context.Context) (bool, error) {
						if !fixed.Load() {
							return false, jobs.Errorf("X_BROKEN", "broken until a deploy")
						}
						return true, nil
					}); err != nil {
						return "", err
					}
					return h.Wait(c)
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
			env.Worker(worker.Config{}, kid, parent)
			res, err := parent.Enqueue(ctx, env.Engine, "p1")
			if err != nil {
				t.Fatal(err)
			}
			env.Await(res.RunID, store.StateFailed)
			kids, err := env.Engine.ListRuns(ctx, store.ListParams{Job: "retkid"})
			if err != nil || len(kids) != 1 {
				t.Fatalf("%d children (%v)", len(kids), err)
			}
			child := env.Await(kids[0].ID, store.StateCompleted)

			// A week and a day on: the child's week is over, the dead letter's month is not.
			env.Fake().Advance(8 * 24 * time.Hour)
			if _, err := env.Engine.SweepRetention(ctx, false); err != nil {
				t.Fatal(err)
			}
			if _, err := env.Engine.GetRun(ctx, child.ID); err != nil {
				t.Errorf("the dead letter's child was deleted while the dead letter may be retried: %v", err)
			}
			fixed.Store(true)
			if _, err := env.Engine.Retry(ctx, engine.RetryRequest{RunID: res.RunID, By: "op"}); err != nil {
				t.Fatal(err)
			}
			if p := env.Await(res.RunID, store.StateCompleted, store.StateFailed); p.State != store.StateCompleted {
				t.Fatalf("retried parent %s (%s: %s), want completed with its child's result", p.State, p.ErrorCode, p.Error)
			}
			out, err := env.Engine.WaitResult(ctx, res.RunID)
			var v string
			if err == nil {
				err = out.Decode(&v)
			}
			if err != nil || v != "kid p1" {
				t.Fatalf("parent result %q (%v), want %q", v, err, "kid p1")
			}

			// The parent completed: its child is no longer protected, and goes with its week.
			if _, err := env.Engine.SweepRetention(ctx, false); err != nil {
				t.Fatal(err)
			}
			if _, err := env.Engine.GetRun(ctx, child.ID); jobs.CodeOf(err) != jobs.CodeRunNotFound {
				t.Fatalf("the completed parent's child after a sweep: %v, want X_RUN_NOT_FOUND", err)
			}
		})
	}
}
