package jobs_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// effectStore counts publishes by event id, and refuses the first record of a durable publish as
// a lost lease after the engine already published: the effect is done and its record is not.
type effectStore struct {
	store.Store
	mu        sync.Mutex
	publishes map[string]int
	refuse    atomic.Bool
}

func (s *effectStore) RunPublish(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	s.mu.Lock()
	s.publishes[p.Name+" "+p.ID]++
	s.mu.Unlock()
	return s.Store.RunPublish(ctx, p)
}

func (s *effectStore) counts() (ids, calls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.publishes {
		ids++
		calls += n
	}
	return ids, calls
}

func (s *effectStore) RunApply(ctx context.Context, ms []store.Mutation) ([]store.MutationResult, error) {
	for i, m := range ms {
		for _, ev := range m.Events {
			if ev.Kind == history.KindEventPublished && s.refuse.CompareAndSwap(true, false) {
				rest := append(append([]store.Mutation(nil), ms[:i]...), ms[i+1:]...)
				res, err := s.Store.RunApply(ctx, rest)
				if err != nil {
					return nil, err
				}
				lost := store.MutationResult{Err: jobs.Errorf(jobs.CodeJobLeaseLost, "injected: the lease was lost")}
				return append(append(res[:i:i], lost), res[i:]...), nil
			}
		}
	}
	return s.Store.RunApply(ctx, ms)
}

type paid struct {
	Order string `json:"order"`
}

// A run that publishes an event and enqueues a child as durable calls, loses its lease between
// the publish and its record (so the publish is done again live), fails an attempt after both
// (so attempt 2 replays them) and sleeps without parking (so the wake-up replays them again):
// one event, one child run.
func TestDurablePublishAndEnqueueFromARetriedAndReplayedRun(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) { durableEffects(t, b) })
	}
}

func durableEffects(t *testing.T, b testenv.Backend) {
	{
		fx := &effectStore{Store: b.Open(t), publishes: map[string]int{}}
		fx.refuse.Store(true)
		env := testenv.Start(t, testenv.Options{Store: fx})

		var receipts, flaky atomic.Int32
		receipt := jobs.MustDefine("receipt", func(in paid) string { return "receipt:" + in.Order }, jobs.NoTenant[paid](),
			func(c *jobs.Ctx, in paid) (string, error) {
				receipts.Add(1)
				return "sent", nil
			})
		listener := jobs.MustDefine("listener", func(in paid) string { return "listen:" + in.Order }, jobs.NoTenant[paid](),
			func(c *jobs.Ctx, in paid) (bool, error) {
				_, ok, err := jobs.WaitForEvent[paid](c, "paid", "order.paid", jobs.Match{"order": in.Order}, time.Hour)
				return ok, err
			})
		var eventID, childID atomic.Value
		checkout := jobs.MustDefine("checkout", func(in paid) string { return "checkout:" + in.Order }, jobs.NoTenant[paid](),
			func(c *jobs.Ctx, in paid) (string, error) {
				id, err := jobs.Publish(c, "order.paid", in)
				if err != nil {
					return "", err
				}
				if prev := eventID.Swap(id); prev != nil && prev != id {
					t.Errorf("the publish returned event %v, then %v", prev, id)
				}
				child, err := receipt.EnqueueFrom(c, "receipt", in)
				if err != nil {
					return "", err
				}
				if prev := childID.Swap(child.RunID); prev != nil && prev != child.RunID {
					t.Errorf("the enqueue returned run %v, then %v", prev, child.RunID)
				}
				if _, err := jobs.Step(c, "flaky", func(context.Context) (int, error) {
					if flaky.Add(1) == 1 {
						return 0, jobs.Errorf(jobs.CodeStoreUnavailable, "first try fails")
					}
					return 1, nil
				}); err != nil {
					return "", err
				}
				if err := jobs.SleepFor(c, time.Hour); err != nil {
					return "", err
				}
				return child.RunID, nil
			})
		env.Worker(worker.Config{StickyRuns: -1}, receipt, listener, checkout)

		l, err := listener.Enqueue(t.Context(), env.Engine, paid{Order: "o1"})
		if err != nil {
			t.Fatal(err)
		}
		env.Await(l.RunID, store.StateSuspended)
		run, err := checkout.Enqueue(t.Context(), env.Engine, paid{Order: "o1"})
		if err != nil {
			t.Fatal(err)
		}
		// The lost lease lapses, the failed attempt's backoff passes, the sleep ends: two hours
		// of the fake clock in 10s advances, then as long as the run takes to finish.
		for i := 0; i < 720; i++ {
			r, err := env.Engine.GetRun(t.Context(), run.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if r.State == store.StateCompleted {
				break
			}
			time.Sleep(2 * time.Millisecond)
			env.Advance(10 * time.Second)
		}
		env.Await(run.RunID, store.StateCompleted)
		env.Await(l.RunID, store.StateCompleted)

		if ids, calls := fx.counts(); ids != 1 || calls < 2 {
			t.Errorf("%d distinct events published in %d publishes; want 1 event, published again after the lost record (≥ 2)", ids, calls)
		}
		children, err := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "receipt"})
		if err != nil || len(children) != 1 {
			t.Fatalf("%d receipt runs (%v), want 1", len(children), err)
		}
		env.Await(children[0].ID, store.StateCompleted)
		// One child run. Its handler ran at least once: the fake clock, racing in 10s jumps past
		// leases so the parent's lost record lapses, can lapse the child's lease too, and a
		// lapsed run is handed out again (at-least-once, never two recorded outcomes).
		if receipts.Load() < 1 {
			t.Errorf("the receipt never ran")
		}
		if children[0].EnqueuedBy != "run:"+run.RunID || childID.Load() != children[0].ID {
			t.Errorf("child %s enqueued by %q; the body saw %v", children[0].ID, children[0].EnqueuedBy, childID.Load())
		}
		evs := env.History(run.RunID)
		pubs, enqs := 0, 0
		for _, ev := range evs {
			switch ev.Kind {
			case history.KindEventPublished:
				pubs++
			case history.KindChildEnqueued:
				enqs++
			}
		}
		if pubs != 1 || enqs != 1 {
			t.Errorf("history holds %d EventPublished and %d ChildEnqueued, want 1 each", pubs, enqs)
		}
		if fx.refuse.Load() {
			t.Error("the lost record was never injected")
		}
	}
}

// The engine enforces the effect commands itself: only the claim's holder acts for the run, a
// malformed command is refused, and a refused command publishes and enqueues nothing.
func TestEffectCommandRefusals(t *testing.T) {
	t.Parallel()
	fx := &effectStore{Store: testenv.Backends()[0].Open(t), publishes: map[string]int{}}
	env := testenv.Start(t, testenv.Options{Store: fx})
	res, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "j", Key: "k", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Declare(t, env.Engine, "w", testenv.Untyped("j", jobs.DefaultQueue))
	tasks, err := env.Engine.Poll(t.Context(), frontend.PollRequest{WorkerID: "w", Queues: []string{jobs.DefaultQueue}, Max: 1})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("poll: %d tasks, %v", len(tasks), err)
	}
	task := tasks[0]
	payload, _ := jobs.Encode(paid{Order: "o"})
	record := func(fence int64, c frontend.Command) error {
		_, err := env.Engine.Record(t.Context(), frontend.RecordRequest{RunID: task.RunID, Fence: fence, LeaseToken: task.LeaseToken,
			WorkerID: "w", AfterSeq: task.LastSeq, Commands: []frontend.Command{c}})
		return err
	}
	publish := frontend.Command{Kind: frontend.CmdPublish, Name: "p", Event: "order.paid", Output: payload}
	enqueue := frontend.Command{Kind: frontend.CmdEnqueue, Name: "e", Effect: &frontend.Effect{Job: "child", Key: "c", NoTenant: true, RunID: "forged"}}
	for name, tc := range map[string]struct {
		fence int64
		cmd   frontend.Command
		code  jobs.Code
	}{
		// The claim's token is bound to its fence: another fence with it is refused before the store.
		"stale fence publish":  {task.Fence - 1, publish, jobs.CodeLeaseInvalid},
		"stale fence enqueue":  {task.Fence + 1, enqueue, jobs.CodeLeaseInvalid},
		"enqueue of nothing":   {task.Fence, frontend.Command{Kind: frontend.CmdEnqueue, Name: "e"}, jobs.CodeBadRequest},
		"publish with no name": {task.Fence, frontend.Command{Kind: frontend.CmdPublish, Event: "x"}, jobs.CodeBadRequest},
		"publish of no event":  {task.Fence, frontend.Command{Kind: frontend.CmdPublish, Name: "p"}, jobs.CodeBadRequest},
		"enqueue with no key":  {task.Fence, frontend.Command{Kind: frontend.CmdEnqueue, Name: "e", Effect: &frontend.Effect{Job: "child", NoTenant: true}}, jobs.CodeJobIdempotencyRequired},
	} {
		if err := record(tc.fence, tc.cmd); jobs.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %s", name, err, tc.code)
		}
	}
	if ids, _ := fx.counts(); ids != 0 {
		t.Errorf("refused commands published %d events", ids)
	}
	if runs, _ := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "child"}); len(runs) != 0 {
		t.Errorf("refused commands enqueued %d runs", len(runs))
	}
	// The holder's enqueue: the engine sets the outcome, whatever the worker sent.
	resp, err := env.Engine.Record(t.Context(), frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, LeaseToken: task.LeaseToken,
		WorkerID: "w", AfterSeq: task.LastSeq, Commands: []frontend.Command{enqueue}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := resp.Appended[0].Decode()
	if err != nil {
		t.Fatal(err)
	}
	if ce, ok := p.(history.ChildEnqueued); !ok || ce.RunID == "forged" || ce.RunID == "" || ce.RunID == res.RunID {
		t.Errorf("recorded %+v", p)
	}
}
