package jobs_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// holdingCompletions is the engine with every completion record held until release is closed.
type holdingCompletions struct {
	frontend.Frontend
	release chan struct{}
	held    atomic.Int32
}

func (h *holdingCompletions) Record(ctx context.Context, req frontend.RecordRequest) (frontend.RecordResponse, error) {
	for _, c := range req.Commands {
		if c.Kind == frontend.CmdComplete {
			h.held.Add(1)
			<-h.release
			break
		}
	}
	return h.Frontend.Record(ctx, req)
}

// A body's slot is free once its final record starts: the worker claims and starts the next run
// while the last one's completion commits, but holds at most twice Concurrency claims at once.
func TestWorkerClaimsAheadWhileCompletionsCommit(t *testing.T) {
	env := newEnv(t)
	var mu sync.Mutex
	started := map[int]bool{}
	startedCh := make(chan int, 10)
	j := jobs.MustDefine("claim-ahead", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(_ *jobs.Ctx, in int) (int, error) {
			mu.Lock()
			if !started[in] {
				started[in] = true
				startedCh <- in
			}
			mu.Unlock()
			return in, nil
		})
	ids := make([]string, 3)
	for i := range ids {
		ids[i] = enqueue(t, env, j, i)
	}
	fe := &holdingCompletions{Frontend: env.Engine, release: make(chan struct{})}
	released := false
	defer func() {
		if !released {
			close(fe.release)
		}
	}()
	env.Worker(worker.Config{Frontend: fe, Concurrency: 1}, j)

	// With one slot, the second body starts while the first completion is held.
	for n := 0; n < 2; n++ {
		select {
		case <-startedCh:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of 3 bodies started while the first completion was held; want 2", n)
		}
	}
	// Two claims held (both completing): the third waits for one of them.
	select {
	case i := <-startedCh:
		t.Fatalf("run %d started while two claims of a worker with Concurrency 1 were still completing", i)
	case <-time.After(300 * time.Millisecond):
	}
	if h := fe.held.Load(); h != 2 {
		t.Fatalf("%d completions held, want 2", h)
	}
	close(fe.release)
	released = true
	for _, id := range ids {
		env.Await(id, store.StateCompleted)
	}
}
