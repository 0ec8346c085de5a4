package jobs_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

type order struct {
	ID string `json:"id"`
}

// A parent starts a child, fails an attempt after the start (so attempt 2 replays it), and
// waits; the child waits for an event, so the parent suspends holding no worker until the child
// completes. One child run is created, linked both ways, and its result reaches the parent.
// A second child, awaited only after a sleep longer than the event lookback, is answered from
// its row; a third one fails, and the parent sees X_CHILD_FAILED.
func TestChildRunsStartOnceAndWakeTheirParent(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			var childRuns atomic.Int32
			label := jobs.MustDefine("label", func(in order) string { return "label:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					childRuns.Add(1)
					if _, ok, err := jobs.WaitForEvent[order](c, "printed", "label.printed", jobs.Match{"id": in.ID}, time.Hour); err != nil || !ok {
						return "", jobs.Errorf("X_NOT_PRINTED", "not printed (%v)", err)
					}
					return "label-for-" + in.ID, nil
				})
			quick := jobs.MustDefine("quick", func(in order) string { return "quick:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) { return "quick-" + in.ID, nil })
			broken := jobs.MustDefine("broken", func(in order) string { return "broken:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					return "", jobs.Errorf("X_NO_STOCK", "no stock for %s", in.ID)
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
			var flaky atomic.Int32
			var failure atomic.Value
			ship := jobs.MustDefine("ship", func(in order) string { return "ship:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) ([]string, error) {
					lbl, err := label.StartChild(c, "label", in)
					if err != nil {
						return nil, err
					}
					q, err := quick.StartChild(c, "quick", in)
					if err != nil {
						return nil, err
					}
					if flaky.Add(1) == 1 {
						return nil, jobs.Errorf(jobs.CodeStoreUnavailable, "first attempt fails after the starts")
					}
					got, err := lbl.Wait(c)
					if err != nil {
						return nil, err
					}
					if err := jobs.SleepFor(c, time.Hour); err != nil { // past the lookback: quick is long done
						return nil, err
					}
					qv, err := q.Wait(c)
					if err != nil {
						return nil, err
					}
					if _, err := broken.Call(c, "broken", in); err != nil {
						failure.Store(jobs.CodeOf(err))
					}
					return []string{got, qv}, nil
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 3, Backoff: jobs.Fixed, Delay: time.Second}))
			env.Worker(worker.Config{}, label, quick, broken, ship)
			res, err := ship.Enqueue(t.Context(), env.Engine, order{ID: "o1"})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 200; i++ {
				if r, _ := env.Engine.GetRun(t.Context(), res.RunID); r.State == store.StateSuspended {
					break
				}
				time.Sleep(5 * time.Millisecond)
				env.Advance(time.Second)
			}
			parent := env.Await(res.RunID, store.StateSuspended)
			if parent.WorkerID == "" && parent.State != store.StateSuspended {
				t.Fatalf("parent %s", parent.State)
			}
			kids, err := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "label"})
			if err != nil || len(kids) != 1 {
				t.Fatalf("%d label runs (%v), want 1 across the retry", len(kids), err)
			}
			child := kids[0]
			env.Await(child.ID, store.StateSuspended)
			if _, err := env.Engine.Publish(t.Context(), "label.printed", order{ID: "o1"}); err != nil {
				t.Fatal(err)
			}
			env.Await(child.ID, store.StateCompleted)
			awaitKind(t, env, res.RunID, history.KindTimerStarted) // the parent woke and sleeps
			env.Await(res.RunID, store.StateSuspended)
			env.Advance(time.Hour)
			done := env.Await(res.RunID, store.StateCompleted)
			var out []string
			if err := jobs.Decode(done.Result, &out); err != nil || len(out) != 2 || out[0] != "label-for-o1" || out[1] != "quick-o1" {
				t.Fatalf("parent result %v (%v)", out, err)
			}
			if got := failure.Load(); got != jobs.CodeChildFailed {
				t.Errorf("a failed child reached its parent as %v, want X_CHILD_FAILED", got)
			}
			if n := childRuns.Load(); n != 1 {
				t.Errorf("the label child ran %d times", n)
			}

			v, err := env.Engine.InspectRun(t.Context(), res.RunID)
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]engine.ChildView{}
			for _, k := range v.Children {
				byName[k.Name] = k
			}
			if l := byName["label"]; len(v.Children) != 3 || l.RunID != child.ID || l.State != store.StateCompleted || byName["broken"].State != store.StateFailed {
				t.Errorf("parent's children: %+v", v.Children)
			}
			cv, err := env.Engine.InspectRun(t.Context(), child.ID)
			if err != nil {
				t.Fatal(err)
			}
			if cv.Parent == nil || cv.Parent.ParentID != res.RunID || cv.Parent.Job != "ship" {
				t.Errorf("child's parent: %+v", cv.Parent)
			}
			waits := 0
			for _, ev := range env.History(res.RunID) {
				if ev.Kind == history.KindEventReceived {
					p, _ := ev.Decode()
					var o jobs.ChildOutcome
					if err := jobs.Decode(p.(history.EventReceived).Payload, &o); err != nil {
						t.Fatal(err)
					}
					waits++
				}
			}
			if waits != 3 {
				t.Errorf("the parent's history holds %d child outcomes, want 3", waits)
			}
		})
	}
}

// Cancelling a parent cancels the children it started, but not a detached one; and nobody but
// the engine publishes a child's outcome or waits on one it is not the parent of.
func TestChildRunsCancelWithTheirParentUnlessDetached(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			idle := jobs.MustDefine("idle", func(in order) string { return "idle:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (bool, error) {
					_, ok, err := jobs.WaitForEvent[order](c, "never", "never", nil, 24*time.Hour)
					return ok, err
				})
			parent := jobs.MustDefine("parent", func(in order) string { return in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (bool, error) {
					if _, err := idle.StartChild(c, "bound", order{ID: in.ID + "-bound"}); err != nil {
						return false, err
					}
					if _, err := idle.StartChild(c, "free", order{ID: in.ID + "-free"}, jobs.Detached()); err != nil {
						return false, err
					}
					grand, err := idle.StartChild(c, "waited", order{ID: in.ID + "-waited"})
					if err != nil {
						return false, err
					}
					return grand.Wait(c)
				})
			env.Worker(worker.Config{}, idle, parent)
			res, err := parent.Enqueue(t.Context(), env.Engine, order{ID: "p"})
			if err != nil {
				t.Fatal(err)
			}
			env.Await(res.RunID, store.StateSuspended)
			v, err := env.Engine.InspectRun(t.Context(), res.RunID)
			if err != nil || len(v.Children) != 3 {
				t.Fatalf("children %+v (%v)", v.Children, err)
			}
			byName := map[string]string{}
			for _, k := range v.Children {
				byName[k.Name] = k.RunID
				env.Await(k.RunID, store.StateSuspended)
			}
			// A forged outcome is refused; the parent still waits.
			if _, err := env.Engine.PublishEvent(t.Context(), jobs.ChildEvent, mustEnc(t, jobs.ChildOutcome{RunID: byName["waited"], State: "completed"})); !jobs.HasCode(err, jobs.CodeBadRequest) {
				t.Errorf("publishing %s: %v, want X_BAD_REQUEST", jobs.ChildEvent, err)
			}
			if _, err := env.Engine.Cancel(t.Context(), res.RunID, "test"); err != nil {
				t.Fatal(err)
			}
			env.Await(byName["bound"], store.StateCancelled)
			env.Await(byName["waited"], store.StateCancelled)
			if r := env.Await(byName["free"], store.StateSuspended); r.State != store.StateSuspended {
				t.Errorf("the detached child is %s", r.State)
			}
		})
	}
}

// The engine refuses a wait for a run that is not the waiter's child, and a plain wait for the
// engine's own event.
func TestAwaitChildRefusals(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: testenv.Backends()[0].Open(t)})
	other, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "other", Key: "o", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "j", Key: "k", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Declare(t, env.Engine, "w", testenv.Untyped("j", jobs.DefaultQueue))
	var task frontend.Task
	for i := 0; i < 3 && task.RunID != res.RunID; i++ {
		tasks, err := env.Engine.Poll(t.Context(), frontend.PollRequest{WorkerID: "w", Queues: []string{jobs.DefaultQueue}, Max: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range tasks {
			if tk.RunID == res.RunID {
				task = tk
			}
		}
	}
	if task.RunID == "" {
		t.Fatal("never claimed the run")
	}
	for name, tc := range map[string]struct {
		cmd  frontend.Command
		code jobs.Code
	}{
		"await a stranger": {frontend.Command{Kind: frontend.CmdAwaitChild, Name: "w", Effect: &frontend.Effect{RunID: other.RunID}}, jobs.CodeNotChild},
		"await nothing":    {frontend.Command{Kind: frontend.CmdAwaitChild, Name: "w"}, jobs.CodeBadRequest},
		"plain wait on the engine's event": {frontend.Command{Kind: frontend.CmdWait, Name: "w", Event: jobs.ChildEvent,
			TimeoutAt: env.Clock.Now().Add(time.Hour)}, jobs.CodeBadRequest},
	} {
		_, err := env.Engine.Record(t.Context(), frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, LeaseToken: task.LeaseToken,
			WorkerID: "w", AfterSeq: task.LastSeq, Commands: []frontend.Command{tc.cmd}})
		if !jobs.HasCode(err, tc.code) {
			t.Errorf("%s: %v, want %s", name, err, tc.code)
		}
	}
	if r, _ := env.Engine.GetRun(context.Background(), res.RunID); r.State != store.StateRunning || r.LastSeq != task.LastSeq {
		t.Errorf("a refused record changed the run: %s at seq %d", r.State, r.LastSeq)
	}
}

// awaitKind waits until a run's history holds an event of kind.
func awaitKind(t *testing.T, env *testenv.Env, runID string, kind history.Kind) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, ev := range env.History(runID) {
			if ev.Kind == kind {
				return
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("run %s: no %s in %v", runID, kind, testenv.Kinds(env.History(runID)))
}

// dropsChildTells loses the engine's child-outcome publishes while drop is set: the engine
// stopping between a child's final commit and telling its parent.
type dropsChildTells struct {
	store.Store
	drop atomic.Bool
}

func (s *dropsChildTells) RunPublish(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	if s.drop.Load() && p.Name == jobs.ChildEvent {
		return store.PublishResult{}, jobs.Errorf(jobs.CodeStoreUnavailable, "the engine stopped before telling the parent")
	}
	return s.Store.RunPublish(ctx, p)
}

// A parent whose child finished while the tell was lost is told by the engine's sweep (run at
// start and on a period): it wakes with the child's result, once.
func TestAParentTheEngineFailedToTellIsToldBySweep(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			st := &dropsChildTells{Store: b.Open(t)}
			st.drop.Store(true)
			env := testenv.Start(t, testenv.Options{Store: st})
			// The child finishes only when told to, after its parent waits for it.
			quick := jobs.MustDefine("quick", func(in order) string { return "quick:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					if _, ok, err := jobs.WaitForEvent[order](c, "go", "quick.go", jobs.Match{"id": in.ID}, time.Hour); err != nil || !ok {
						return "", jobs.Errorf("X_NOT_GO", "no go (%v)", err)
					}
					return "quick-" + in.ID, nil
				})
			parent := jobs.MustDefine("parent", func(in order) string { return "parent:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) { return quick.Call(c, "quick", in) })
			env.Worker(worker.Config{}, quick, parent)
			res, err := parent.Enqueue(t.Context(), env.Engine, order{ID: "o9"})
			if err != nil {
				t.Fatal(err)
			}
			var kids []store.Run
			for i := 0; i < 400 && len(kids) == 0; i++ {
				kids, _ = env.Engine.ListRuns(t.Context(), store.ListParams{Job: "quick"})
				time.Sleep(5 * time.Millisecond)
			}
			if len(kids) != 1 {
				t.Fatalf("%d children", len(kids))
			}
			env.Await(kids[0].ID, store.StateSuspended)
			env.Await(res.RunID, store.StateSuspended)
			if _, err := env.Engine.Publish(t.Context(), "quick.go", order{ID: "o9"}); err != nil {
				t.Fatal(err)
			}
			env.Await(kids[0].ID, store.StateCompleted)
			time.Sleep(50 * time.Millisecond)
			if r, _ := env.Engine.GetRun(t.Context(), res.RunID); r.State != store.StateSuspended {
				t.Fatalf("the parent is %s before anyone told it", r.State)
			}
			st.drop.Store(false)
			for i := 0; i < 2; i++ { // a second sweep finds nothing new to say
				if _, err := env.Engine.TellWaitingParents(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			done := env.Await(res.RunID, store.StateCompleted)
			var out string
			if err := jobs.Decode(done.Result, &out); err != nil || out != "quick-o9" {
				t.Fatalf("parent result %q (%v)", out, err)
			}
			if n, err := env.Engine.TellWaitingParents(t.Context()); err != nil || n != 0 {
				t.Errorf("after the parent finished the sweep told %d (%v), want 0", n, err)
			}
		})
	}
}

// linkGate holds ChildLinkAdd until released, saying when it is reached.
type linkGate struct {
	store.Store
	at      chan struct{}
	release chan struct{}
}

func (g *linkGate) ChildLinkAdd(ctx context.Context, l store.ChildLink) (store.ChildLink, error) {
	g.at <- struct{}{}
	<-g.release
	return g.Store.ChildLinkAdd(ctx, l)
}

// A parent cancelled while its StartChild is carried out (the child run made, its link not yet
// written) still takes the child down with it. The cancel's cascade read the parent's children
// before the link existed, and the child ran to its end, side effects and all, under a cancelled
// parent; in a plain race (no gate) that was most of 200 children on SQLite and Postgres.
func TestACancelDuringStartChildCancelsTheChild(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			g := &linkGate{Store: b.Open(t), at: make(chan struct{}, 1), release: make(chan struct{})}
			env := testenv.Start(t, testenv.Options{Store: g})
			child := jobs.MustDefine("gated-child", func(in order) string { return "c:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					if err := jobs.SleepFor(c, time.Hour); err != nil {
						return "", err
					}
					return "done", nil
				})
			parent := jobs.MustDefine("gated-parent", func(in order) string { return "p:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					h, err := child.StartChild(c, "kid", in)
					if err != nil {
						return "", err
					}
					return h.Wait(c)
				})
			env.Worker(worker.Config{}, child, parent)
			res, err := parent.Enqueue(t.Context(), env.Engine, order{ID: "o1"})
			if err != nil {
				t.Fatal(err)
			}
			<-g.at // the child run exists; its link is about to be written
			if _, err := env.Engine.Cancel(t.Context(), res.RunID, "operator"); err != nil {
				t.Fatal(err)
			}
			close(g.release)
			env.Await(res.RunID, store.StateCancelled)
			kids, err := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "gated-child"})
			if err != nil || len(kids) != 1 {
				t.Fatalf("%d children (%v)", len(kids), err)
			}
			env.Await(kids[0].ID, store.StateCancelled)
			evs := env.History(kids[0].ID)
			last, err := evs[len(evs)-1].Decode()
			if c, ok := last.(history.RunCancelled); err != nil || !ok || c.Reason != "parent "+res.RunID+" was cancelled" {
				t.Fatalf("the child's last event: %+v, %v; want its parent's cancel", last, err)
			}
		})
	}
}

// A run someone else enqueued under the key a parent's StartChild then uses is not adopted as
// its child, even when its EnqueuedBy names the parent ("run:<id>" is attribution any caller may
// write): the parent gets that run back, unlinked, and cancelling the parent leaves it alone.
func TestAForgedAttributionIsNotAdoptedAsAChild(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			idle := jobs.MustDefine("adopt-idle", func(in order) string { return in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					_, _, err := jobs.WaitForEvent[order](c, "never", "adopt.never", nil, time.Hour)
					return "", err
				})
			parent := jobs.MustDefine("adopt-parent", func(in order) string { return in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					if _, _, err := jobs.WaitForEvent[order](c, "gate", "adopt.go", nil, time.Hour); err != nil {
						return "", err
					}
					h, err := idle.StartChild(c, "bound", order{ID: in.ID + "-bound"})
					if err != nil {
						return "", err
					}
					return h.RunID, jobs.SleepFor(c, time.Hour)
				})
			env.Worker(worker.Config{}, idle, parent)
			p, err := parent.Enqueue(t.Context(), env.Engine, order{ID: "p"})
			if err != nil {
				t.Fatal(err)
			}
			env.Await(p.RunID, store.StateSuspended)
			req, err := idle.Request(order{ID: "p-bound"})
			if err != nil {
				t.Fatal(err)
			}
			req.EnqueuedBy = "run:" + p.RunID
			mine, err := env.Engine.Enqueue(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			env.Await(mine.RunID, store.StateSuspended)
			if _, err := env.Engine.Publish(t.Context(), "adopt.go", order{ID: "x"}); err != nil {
				t.Fatal(err)
			}
			awaitKind(t, env, p.RunID, history.KindTimerStarted)
			if l, ok, err := env.Store.ParentOf(t.Context(), mine.RunID); err != nil || ok {
				t.Fatalf("the run enqueued by an operator was linked as a child (%+v, %v)", l, err)
			}
			if _, err := env.Engine.Cancel(t.Context(), p.RunID, "operator"); err != nil {
				t.Fatal(err)
			}
			env.Await(p.RunID, store.StateCancelled)
			if r, err := env.Store.RunGet(t.Context(), mine.RunID); err != nil || r.State != store.StateSuspended {
				t.Fatalf("the operator's run is %s after the parent's cancel (%v), want it left suspended", r.State, err)
			}
		})
	}
}

// failsLinkOnce fails the first ChildLinkAdd, as an engine stopped between a child's creation and
// its link would leave it.
type failsLinkOnce struct {
	store.Store
	failed atomic.Bool
}

func (f *failsLinkOnce) ChildLinkAdd(ctx context.Context, l store.ChildLink) (store.ChildLink, error) {
	if f.failed.CompareAndSwap(false, true) {
		return store.ChildLink{}, jobs.Errorf(jobs.CodeStoreUnavailable, "the link is lost")
	}
	return f.Store.ChildLinkAdd(ctx, l)
}

// A child made by a StartChild whose link was lost is linked when the call is made again: the
// enqueue finds the run the call made (its id is the call's), not someone else's.
func TestALostChildLinkIsWrittenWhenTheCallIsMadeAgain(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			st := &failsLinkOnce{Store: b.Open(t)}
			env := testenv.Start(t, testenv.Options{Store: st})
			child := jobs.MustDefine("relink-child", func(in order) string { return "c:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) { return "kid-" + in.ID, nil })
			parent := jobs.MustDefine("relink-parent", func(in order) string { return "p:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					h, err := child.StartChild(c, "kid", in)
					if err != nil {
						return "", err
					}
					return h.Wait(c)
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 3, Backoff: jobs.Fixed, Delay: time.Millisecond}))
			env.Worker(worker.Config{}, child, parent)
			res, err := parent.Enqueue(t.Context(), env.Engine, order{ID: "o1"})
			if err != nil {
				t.Fatal(err)
			}
			done := env.Await(res.RunID, store.StateCompleted)
			var out string
			if err := jobs.Decode(done.Result, &out); err != nil || out != "kid-o1" {
				t.Fatalf("parent result %q (%v)", out, err)
			}
			kids, err := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "relink-child"})
			if err != nil || len(kids) != 1 {
				t.Fatalf("%d children (%v), want 1", len(kids), err)
			}
			if l, ok, err := env.Store.ParentOf(t.Context(), kids[0].ID); err != nil || !ok || l.ParentID != res.RunID {
				t.Fatalf("the child's link: %+v %v (%v), want its parent %s", l, ok, err, res.RunID)
			}
		})
	}
}
