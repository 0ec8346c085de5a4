package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// unreachable is an engine whose polls all fail, as one that is down does.
type unreachable struct{ frontend.Frontend }

func (unreachable) Poll(context.Context, frontend.PollRequest) ([]frontend.Task, error) {
	return nil, jobs.Errorf(jobs.CodeEngineUnreachable, "nothing listens")
}

// A worker whose engine is away keeps retrying its polls, and says so once, not at every retry.
func TestAWorkerWhoseEngineIsAwayWarnsOnce(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	logs := &testenv.LogBuffer{}
	j := testenv.Untyped("away", jobs.DefaultQueue)
	reg, err := jobs.NewRegistry(j)
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Config{Frontend: unreachable{env.Engine}, Registry: reg, Clock: env.Clock,
		Logger: logs.Logger(), PollWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // retries at 50 ms, doubling to a second: five or more
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = w.Stop(ctx)
	if n := strings.Count(logs.String(), "jobs.poll.failed"); n != 1 {
		t.Fatalf("%d poll warnings in 1.5s of an engine away, want 1:\n%s", n, logs.String())
	}
}
