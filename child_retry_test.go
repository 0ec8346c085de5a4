package jobs_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// A child fails while its parent sleeps (the engine publishes the failure for it), an operator
// retries it, and the parent then waits for it while it is live again: the wait is for the
// child's current life, so the first life's failure, still in the event log's lookback window,
// is not taken for its outcome. The parent gets the retried child's result.
func TestRetriedChildIsAwaitedInItsCurrentLife(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			var fixed atomic.Bool
			kid := jobs.MustDefine("lifekid", func(in order) string { return "lifekid:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					if !fixed.Load() {
						return "", jobs.Errorf("X_BROKEN", "broken")
					}
					if _, ok, err := jobs.WaitForEvent[order](c, "go", "life.go", jobs.Match{"id": in.ID}, time.Hour); err != nil || !ok {
						return "", jobs.Errorf("X_NO_GO", "no go (%v)", err)
					}
					return "kid-ok", nil
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
			parent := jobs.MustDefine("lifeparent", func(in order) string { return "lifeparent:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					h, err := kid.StartChild(c, "kid", in)
					if err != nil {
						return "", err
					}
					if err := jobs.Sleep(c, "nap", time.Minute); err != nil {
						return "", err
					}
					return h.Wait(c)
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
			env.Worker(worker.Config{}, kid, parent)
			res, err := parent.Enqueue(t.Context(), env.Engine, order{ID: "l1"})
			if err != nil {
				t.Fatal(err)
			}
			env.Await(res.RunID, store.StateSuspended)
			kids, err := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "lifekid"})
			if err != nil || len(kids) != 1 {
				t.Fatalf("%d children (%v)", len(kids), err)
			}
			child := env.Await(kids[0].ID, store.StateFailed)
			fixed.Store(true)
			if _, err := env.Engine.Retry(t.Context(), engine.RetryRequest{RunID: child.ID, By: "op"}); err != nil {
				t.Fatal(err)
			}
			env.Await(child.ID, store.StateSuspended)
			env.Advance(time.Minute)
			awaitKind(t, env, res.RunID, history.KindEventWaitStarted)
			time.Sleep(100 * time.Millisecond)
			if p, _ := env.Engine.GetRun(t.Context(), res.RunID); p.State != store.StateSuspended {
				t.Fatalf("parent is %s (%s: %s) while its retried child is live: it took the child's first outcome", p.State, p.ErrorCode, p.Error)
			}
			if _, err := env.Engine.Publish(t.Context(), "life.go", order{ID: "l1"}); err != nil {
				t.Fatal(err)
			}
			if p := env.Await(res.RunID, store.StateCompleted, store.StateFailed); p.State != store.StateCompleted {
				t.Fatalf("parent %s (%s: %s), want completed with the retried child's result", p.State, p.ErrorCode, p.Error)
			}
			out, err := env.Engine.WaitResult(t.Context(), res.RunID)
			var v string
			if err == nil {
				err = out.Decode(&v)
			}
			if err != nil || v != "kid-ok" {
				t.Errorf("parent result %q (%v), want kid-ok", v, err)
			}
		})
	}
}

// retriesInSweep retries a run (an operator's retry) just after the store answered the child
// sweep's read of finished children: the sweep then reads a child that is on its way again.
type retriesInSweep struct {
	store.Store
	eng   atomic.Pointer[engine.Engine]
	retry atomic.Pointer[string]
}

func (s *retriesInSweep) FinishedChildrenOfWaiting(ctx context.Context, event string, limit int) ([]store.ChildLink, error) {
	links, err := s.Store.FinishedChildrenOfWaiting(ctx, event, limit)
	if id := s.retry.Swap(nil); id != nil && err == nil {
		if _, rerr := s.eng.Load().Retry(ctx, engine.RetryRequest{RunID: *id, By: "op"}); rerr != nil {
			return nil, rerr
		}
	}
	return links, err
}

// The child sweep tells waiting parents of finished children. A child an operator retried
// between the sweep's read and its telling is on its way again: the sweep does not publish its
// row (a "ready" child is no outcome), so its parent, waiting for it later, gets its result.
func TestChildSweepSkipsAChildRetriedSinceItsRead(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			st := &retriesInSweep{Store: b.Open(t)}
			env := testenv.Start(t, testenv.Options{Store: st})
			st.eng.Store(env.Engine)
			var fixed atomic.Bool
			flaky := jobs.MustDefine("sweepkid", func(in order) string { return "sweepkid:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					if !fixed.Load() {
						return "", jobs.Errorf("X_BROKEN", "broken")
					}
					if _, ok, err := jobs.WaitForEvent[order](c, "go", "sweep.go", jobs.Match{"id": in.ID}, time.Hour); err != nil || !ok {
						return "", jobs.Errorf("X_NO_GO", "no go (%v)", err)
					}
					return "flaky-ok", nil
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
			slow := jobs.MustDefine("sweepslow", func(in order) string { return "sweepslow:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					if _, ok, err := jobs.WaitForEvent[order](c, "go", "sweep.slow", jobs.Match{"id": in.ID}, time.Hour); err != nil || !ok {
						return "", jobs.Errorf("X_NO_GO", "no go (%v)", err)
					}
					return "slow-ok", nil
				})
			parent := jobs.MustDefine("sweepparent", func(in order) string { return "sweepparent:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					f, err := flaky.StartChild(c, "flaky", in)
					if err != nil {
						return "", err
					}
					s, err := slow.StartChild(c, "slow", in)
					if err != nil {
						return "", err
					}
					if _, err := s.Wait(c); err != nil {
						return "", err
					}
					return f.Wait(c)
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
			env.Worker(worker.Config{}, flaky, slow, parent)
			res, err := parent.Enqueue(t.Context(), env.Engine, order{ID: "s1"})
			if err != nil {
				t.Fatal(err)
			}
			awaitKind(t, env, res.RunID, history.KindEventWaitStarted) // waiting for slow
			kids, err := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "sweepkid"})
			if err != nil || len(kids) != 1 {
				t.Fatalf("%d flaky children (%v)", len(kids), err)
			}
			child := env.Await(kids[0].ID, store.StateFailed)
			fixed.Store(true)
			st.retry.Store(&child.ID)
			if _, err := env.Engine.TellWaitingParents(t.Context()); err != nil {
				t.Fatal(err)
			}
			if st.retry.Load() != nil {
				t.Fatal("the sweep did not read the finished children")
			}
			env.Await(child.ID, store.StateSuspended) // on its way again, waiting for sweep.go
			if _, err := env.Engine.Publish(t.Context(), "sweep.slow", order{ID: "s1"}); err != nil {
				t.Fatal(err)
			}
			// The parent now waits for the retried child.
			for i := 0; i < 2000; i++ {
				n := 0
				for _, ev := range env.History(res.RunID) {
					if ev.Kind == history.KindEventWaitStarted {
						n++
					}
				}
				if p, _ := env.Engine.GetRun(t.Context(), res.RunID); n == 2 && p.State == store.StateSuspended || p.State.Finished() {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			if p, _ := env.Engine.GetRun(t.Context(), res.RunID); p.State != store.StateSuspended {
				t.Fatalf("parent is %s (%s: %s) while its retried child is live", p.State, p.ErrorCode, p.Error)
			}
			if _, err := env.Engine.Publish(t.Context(), "sweep.go", order{ID: "s1"}); err != nil {
				t.Fatal(err)
			}
			if p := env.Await(res.RunID, store.StateCompleted, store.StateFailed); p.State != store.StateCompleted {
				t.Errorf("parent %s (%s: %s), want completed with the retried child's result", p.State, p.ErrorCode, p.Error)
			}
		})
	}
}

// A child cancelled while it waits for a retry after a failed attempt ended because of the
// cancel: its parent hears X_RUN_CANCELLED with the cancel's reason, as WaitResult says, not the
// attempt's error its row keeps. So does a parent that waits only after the cancel (answered
// from the row). A failed child's code is said once in the parent's error.
func TestCancelledChildIsReportedAsCancelled(t *testing.T) {
	for _, b := range testenv.Backends() {
		for _, late := range []bool{false, true} {
			name := b.Name + "/waiting"
			if late {
				name = b.Name + "/waits-after"
			}
			t.Run(name, func(t *testing.T) {
				env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
				kid := jobs.MustDefine("cxkid", func(in order) string { return "cxkid:" + in.ID }, jobs.NoTenant[order](),
					func(c *jobs.Ctx, in order) (string, error) {
						return "", jobs.Errorf("X_FLAKY", "flaky upstream")
					}, jobs.Retry(jobs.RetryPolicy{Attempts: 5, Backoff: jobs.Fixed, Delay: time.Hour}))
				var seen atomic.Value
				parent := jobs.MustDefine("cxparent", func(in order) string { return "cxparent:" + in.ID }, jobs.NoTenant[order](),
					func(c *jobs.Ctx, in order) (string, error) {
						h, err := kid.StartChild(c, "kid", in)
						if err != nil {
							return "", err
						}
						if late {
							if err := jobs.Sleep(c, "nap", 10*time.Minute); err != nil {
								return "", err
							}
						}
						v, err := h.Wait(c)
						if err != nil {
							seen.Store(err.Error())
						}
						return v, err
					}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
				env.Worker(worker.Config{}, kid, parent)
				res, err := parent.Enqueue(t.Context(), env.Engine, order{ID: "c1"})
				if err != nil {
					t.Fatal(err)
				}
				var child store.Run
				for i := 0; i < 2000 && child.ID == ""; i++ {
					kids, _ := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "cxkid"})
					if len(kids) == 1 && kids[0].State == store.StateDelayed {
						child = kids[0]
					}
					time.Sleep(2 * time.Millisecond)
				}
				if child.ID == "" {
					t.Fatal("no child waiting for its retry")
				}
				env.Await(res.RunID, store.StateSuspended)
				const reason = "operator: order c1 was withdrawn"
				if _, err := env.Engine.Cancel(t.Context(), child.ID, reason); err != nil {
					t.Fatal(err)
				}
				if late {
					env.Advance(10 * time.Minute) // past the lookback: the wait is answered from the row
				}
				if p := env.Await(res.RunID, store.StateFailed, store.StateCompleted); p.ErrorCode != string(jobs.CodeChildFailed) {
					t.Fatalf("parent %s %s, want failed %s", p.State, p.ErrorCode, jobs.CodeChildFailed)
				}
				msg, _ := seen.Load().(string)
				want := "child run " + child.ID + " (kid) cancelled: " + string(jobs.CodeRunCancelled) + ": " + reason
				if !strings.HasSuffix(msg, want) || strings.Contains(msg, "X_FLAKY") {
					t.Errorf("parent saw %q, want it to end %q", msg, want)
				}
			})
		}
	}
}

// X_REFUSED_ONCE is a terminal code: a run failing with it is dead-lettered with it as its code.
var _ = jobs.RegisterErrorRetry(map[jobs.Code]jobs.RetryClass{"X_REFUSED_ONCE": jobs.Terminal})

// A failed child's error text starts with its code, as its worker printed it: the parent's
// X_CHILD_FAILED names the code once.
func TestFailedChildCodeIsSaidOnce(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			kid := jobs.MustDefine("oncekid", func(in order) string { return "oncekid:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					return "", jobs.Errorf("X_REFUSED_ONCE", "refused upstream")
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 3}))
			var seen atomic.Value
			parent := jobs.MustDefine("onceparent", func(in order) string { return "onceparent:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					v, err := kid.Call(c, "kid", in)
					if err != nil {
						seen.Store(err.Error())
					}
					return v, err
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
			env.Worker(worker.Config{}, kid, parent)
			res, err := parent.Enqueue(t.Context(), env.Engine, order{ID: "f1"})
			if err != nil {
				t.Fatal(err)
			}
			env.Await(res.RunID, store.StateFailed, store.StateCompleted)
			msg, _ := seen.Load().(string)
			if !strings.Contains(msg, "(kid) failed: X_REFUSED_ONCE: refused upstream") || strings.Contains(msg, "X_REFUSED_ONCE: X_REFUSED_ONCE") {
				t.Errorf("parent saw %q, want the child's code once: \"… failed: X_REFUSED_ONCE: refused upstream …\"", msg)
			}
		})
	}
}

// A retry of a parent from a step after its child's start and before its wait keeps the start
// (it replays from the history) and makes the wait again. The way to re-run the same failed
// child under its parent is to retry the child first, then the parent from such a step: the
// wait is made again and waits for the child's current life, whose result the parent gets. No
// new child is started (a retry from a step before the start starts one:
// TestRetryParentFromAStepStartsANewChild).
func TestRetryParentAfterItsChildFromAStep(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			var fixed atomic.Bool
			kid := jobs.MustDefine("rfkid", func(in order) string { return "rfkid:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					if !fixed.Load() {
						return "", jobs.Errorf("X_BROKEN", "broken")
					}
					return "kid-ok", nil
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
			parent := jobs.MustDefine("rfparent", func(in order) string { return "rfparent:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					if _, err := jobs.Step(c, "prep", func(context.Context) (int, error) { return 1, nil }); err != nil {
						return "", err
					}
					h, err := kid.StartChild(c, "kid", in)
					if err != nil {
						return "", err
					}
					if _, err := jobs.Step(c, "started", func(context.Context) (int, error) { return 1, nil }); err != nil {
						return "", err
					}
					return h.Wait(c)
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
			env.Worker(worker.Config{}, kid, parent)
			res, err := parent.Enqueue(t.Context(), env.Engine, order{ID: "r1"})
			if err != nil {
				t.Fatal(err)
			}
			if p := env.Await(res.RunID, store.StateFailed, store.StateCompleted); p.ErrorCode != string(jobs.CodeChildFailed) {
				t.Fatalf("parent %s %s", p.State, p.ErrorCode)
			}
			kids, err := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "rfkid"})
			if err != nil || len(kids) != 1 {
				t.Fatalf("%d children (%v)", len(kids), err)
			}
			fixed.Store(true)
			if _, err := env.Engine.Retry(t.Context(), engine.RetryRequest{RunID: kids[0].ID, By: "op"}); err != nil {
				t.Fatal(err)
			}
			env.Await(kids[0].ID, store.StateCompleted)
			if _, err := env.Engine.Retry(t.Context(), engine.RetryRequest{RunID: res.RunID, FromStep: "started", By: "op"}); err != nil {
				t.Fatal(err)
			}
			awaitKind(t, env, res.RunID, history.KindRunRetried)
			if p := env.Await(res.RunID, store.StateCompleted, store.StateFailed); p.State != store.StateCompleted {
				t.Fatalf("parent %s (%s: %s) after its child was retried and completed", p.State, p.ErrorCode, p.Error)
			}
			if again, _ := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "rfkid"}); len(again) != 1 {
				t.Errorf("%d children, want the one child, retried", len(again))
			}
		})
	}
}
