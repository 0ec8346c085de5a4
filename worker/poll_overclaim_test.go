package worker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// greedy is an engine that answers a poll with more runs than it asked for (a bug, or a proxy
// that merged two answers).
type greedy struct {
	frontend.Frontend
	answered atomic.Int64
}

func (g *greedy) Poll(ctx context.Context, req frontend.PollRequest) ([]frontend.Task, error) {
	req.Max += 2
	tasks, err := g.Frontend.Poll(ctx, req)
	g.answered.Add(int64(len(tasks)))
	return tasks, err
}

// A queue's concurrency holds whatever the engine answers: runs beyond what a poll asked for are
// handed back unrun (no attempt spent), not executed past the queue's slots, and every run still
// completes once.
func TestRunsBeyondAPollsAskAreHandedBack(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	var mu sync.Mutex
	running, most := 0, 0
	j := jobs.MustDefine("overclaimed", func(i int) string { return fmt.Sprint(i) }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, in int) (int, error) {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			return in, nil
		})
	fe := &greedy{Frontend: env.Engine}
	var ids []string
	for i := range 4 {
		res, err := j.Enqueue(context.Background(), env.Engine, i)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.RunID)
	}
	env.Worker(worker.Config{Frontend: fe, Queues: map[string]int{jobs.DefaultQueue: 1}, ClaimLinger: -1}, j)
	for _, id := range ids {
		run := env.Await(id, store.StateCompleted)
		if run.Attempt != 1 {
			t.Fatalf("run %s completed on attempt %d; a run handed back spends none", id, run.Attempt)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most > 1 {
		t.Fatalf("%d bodies ran at once on a queue of concurrency 1 (the engine answered %d runs)", most, fe.answered.Load())
	}
	if fe.answered.Load() <= int64(len(ids)) {
		t.Fatalf("the engine answered %d runs for %d: it never over-answered, the test proves nothing", fe.answered.Load(), len(ids))
	}
}

// erring is an engine whose first poll claims runs and still answers an error with them.
type erring struct {
	frontend.Frontend
	once sync.Once
}

func (e *erring) Poll(ctx context.Context, req frontend.PollRequest) ([]frontend.Task, error) {
	tasks, err := e.Frontend.Poll(ctx, req)
	if err == nil && len(tasks) > 0 {
		e.once.Do(func() { err = jobs.Errorf(jobs.CodeStoreUnavailable, "the answer was cut short") })
	}
	return tasks, err
}

// A poll that fails keeps none of the queue's slots, whatever runs came with its error: the
// queue goes on claiming, and a run the failed poll did claim is run again once its lease lapses.
func TestAFailedPollKeepsNoSlot(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	j := jobs.MustDefine("cutshort", func(i int) string { return fmt.Sprint(i) }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, in int) (int, error) { return in, nil })
	first, err := j.Enqueue(context.Background(), env.Engine, 1)
	if err != nil {
		t.Fatal(err)
	}
	env.Worker(worker.Config{Frontend: &erring{Frontend: env.Engine}, Queues: map[string]int{jobs.DefaultQueue: 1}, ClaimLinger: -1}, j)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if run, err := env.Engine.GetRun(context.Background(), first.RunID); err == nil && run.State == store.StateRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first run was never claimed")
		}
	}
	second, err := j.Enqueue(context.Background(), env.Engine, 2)
	if err != nil {
		t.Fatal(err)
	}
	env.Await(second.RunID, store.StateCompleted)
	env.Advance(time.Minute) // the failed poll's claim lapses
	env.Await(first.RunID, store.StateCompleted)
}
