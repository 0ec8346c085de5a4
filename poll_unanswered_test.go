package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// lateClaim is a store whose claim behaves as a database driver does when its caller's context
// is cancelled mid-claim: the claim the driver sent is still committed by the database, but the
// caller is answered the context's error. The claim waits at go until the test lets it through.
type lateClaim struct {
	store.Store
	entered chan struct{}
	gate    chan struct{}
}

func (s *lateClaim) RunClaim(ctx context.Context, p store.ClaimParams) ([]store.Run, error) {
	select {
	case s.entered <- struct{}{}:
		<-s.gate
	default: // claims after the first go straight through
	}
	runs, err := s.Store.RunClaim(context.WithoutCancel(ctx), p)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return runs, err
}

// A poll whose caller leaves while its claim is in flight (a worker that stops) does not leave
// the run it claimed held by nobody: the engine hears the claim to its end and hands the run
// back, ready, with no attempt spent, and another worker claims it at once. Before, the store
// was asked under the caller's context: a driver cancelled mid-claim returned at once while the
// database still committed the claim, after the worker's stop had released what it held, and the
// run stayed running under the stopped worker until its lease lapsed (30 s; for good on a fake
// clock, which is how TestVersionAcrossADeploy/postgres failed under load).
func TestAClaimLandingAfterItsPollLeftIsHandedBack(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			st := &lateClaim{Store: b.Open(t), entered: make(chan struct{}), gate: make(chan struct{})}
			env := testenv.Start(t, testenv.Options{Store: st})
			testenv.Declare(t, env.Engine, "gone", testenv.Untyped("late", "lateq"))
			testenv.Declare(t, env.Engine, "next", testenv.Untyped("late", "lateq"))
			res, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "late", Queue: "lateq", Key: "k", NoTenant: true})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			type polled struct {
				tasks []frontend.Task
				err   error
			}
			done := make(chan polled, 1)
			go func() {
				tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "gone", Queues: []string{"lateq"}, Max: 1})
				done <- polled{tasks, err}
			}()
			<-st.entered
			cancel()
			close(st.gate)
			got := <-done
			if len(got.tasks) != 0 || got.err == nil {
				t.Fatalf("the left poll was answered %d tasks, %v; want none and its context's error", len(got.tasks), got.err)
			}
			run, err := env.Engine.GetRun(t.Context(), res.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if run.State != store.StateReady || run.WorkerID != "" {
				t.Fatalf("after the left poll the run is %s under worker %q; want ready, held by nobody", run.State, run.WorkerID)
			}
			var tasks []frontend.Task
			for i := 0; i < 500 && len(tasks) == 0; i++ {
				if tasks, err = env.Engine.Poll(t.Context(), frontend.PollRequest{WorkerID: "next", Queues: []string{"lateq"}, Max: 1}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(2 * time.Millisecond)
			}
			if len(tasks) != 1 || tasks[0].RunID != res.RunID || tasks[0].Attempt != run.Attempt {
				t.Fatalf("the next worker claimed %+v; want run %s at attempt %d", tasks, res.RunID, run.Attempt)
			}
		})
	}
}
