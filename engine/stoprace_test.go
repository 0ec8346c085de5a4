package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store/memory"
)

// An enqueue racing Engine.Stop returns, done or refused (X_DRAINING), even with a context that
// never ends. It could see the engine started, Stop could then end the create loop, and the
// request sat in a queue nobody read: an app enqueueing during its shutdown hung for ever.
func TestAnEnqueueRacingStopReturns(t *testing.T) {
	t.Parallel()
	for round := 0; round < 300; round++ {
		e, err := engine.New(engine.Config{Store: memory.New(), AllowUndeclared: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					_, err := e.Enqueue(context.Background(), jobs.EnqueueRequest{Job: "j", Key: fmt.Sprint(g, "-", i), NoTenant: true})
					if err != nil && !jobs.HasCode(err, jobs.CodeDraining) {
						t.Errorf("enqueue: %v", err)
						return
					}
				}
			}()
		}
		time.Sleep(time.Millisecond)
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		close(stop)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: an enqueue with a background context never returned after Stop", round)
		}
	}
}
