package worker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// LimitConfig.Global across two queues, one of them idle: the idle queue's long-poll lends its
// reservation while it waits, so the busy queue's runs go on at once. When the poll held it for
// its whole wait, each run of the busy queue waited out the idle queue's PollWait (a minute
// here, so the deadline below cannot be met that way on any machine).
func TestGlobalBudgetIsNotHeldByAnIdleQueuesPoll(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
	def := func(q string) *jobs.Job[int, int] {
		return jobs.MustDefine(q, func(n int) string { return fmt.Sprint(n) }, jobs.NoTenant[int](),
			func(*jobs.Ctx, int) (int, error) { return 0, nil }, jobs.Queue(q))
	}
	busy, idle := def("busy"), def("idle")
	env.Worker(worker.Config{Concurrency: 1, PollWait: time.Minute, Limits: worker.LimitConfig{Global: 1}}, busy, idle)
	var ids []string
	for n := range 5 {
		res, err := busy.Enqueue(t.Context(), env.Engine, n)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.RunID)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for {
			r, err := env.Engine.Store().RunGet(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if r.State == store.StateCompleted {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %s is %s after 30 s: the idle queue's poll holds the Global budget", id, r.State)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
