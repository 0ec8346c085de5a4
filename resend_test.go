package jobs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// applyGate holds the first RunApply whose batch names run until released.
type applyGate struct {
	store.Store
	mu      sync.Mutex
	run     string
	entered chan struct{}
	release chan struct{}
}

func (g *applyGate) RunApply(ctx context.Context, ms []store.Mutation) ([]store.MutationResult, error) {
	g.mu.Lock()
	hold := false
	for _, m := range ms {
		if m.RunID == g.run {
			hold, g.run = true, ""
		}
	}
	g.mu.Unlock()
	if hold {
		close(g.entered)
		<-g.release
	}
	return g.Store.RunApply(ctx, ms)
}

// claimFor declares an untyped job on queue q for worker w, enqueues a run of it and claims it.
func claimFor(t *testing.T, env *testenv.Env, w, q string) frontend.Task {
	t.Helper()
	ctx := t.Context()
	testenv.Declare(t, env.Engine, w, testenv.Untyped("j", q))
	if _, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Queue: q, Key: "k", NoTenant: true}); err != nil {
		t.Fatal(err)
	}
	tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: w, Queues: []string{q}, Max: 1})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("poll: %d tasks, %v", len(tasks), err)
	}
	return tasks[0]
}

// A worker's resend of a record whose first send was still committing when the resend arrived
// (the connection dropped mid-commit) is answered with what landed. It looked for its events
// before the first send committed, found none, and was then refused X_HISTORY_STALE: the step
// failed, the worker's failure record was refused on the same seq, and the run sat until its
// lease lapsed.
func TestAResendRacingItsFirstSendIsAnswered(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			g := &applyGate{Store: b.Open(t), entered: make(chan struct{}), release: make(chan struct{})}
			env := testenv.Start(t, testenv.Options{Store: g})
			ctx := t.Context()
			task := claimFor(t, env, "w", "q")
			g.mu.Lock()
			g.run = task.RunID
			g.mu.Unlock()
			out, _ := jobs.Encode(1)
			req := frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w", LeaseToken: task.LeaseToken,
				AfterSeq: task.LastSeq, Commands: []frontend.Command{{Kind: frontend.CmdStep, Name: "charge", Output: out}}}
			cctx, cancel := context.WithCancel(ctx)
			first := make(chan error, 1)
			go func() { _, err := env.Engine.Record(cctx, req); first <- err }()
			<-g.entered
			cancel() // the worker's connection drops while its record commits
			if err := <-first; !jobs.HasCode(err, jobs.CodeCommitUnknown) {
				t.Fatalf("the first send: %v; want X_COMMIT_UNKNOWN", err)
			}
			req.Retry = true
			second := make(chan error, 1)
			var resp frontend.RecordResponse
			go func() {
				var err error
				resp, err = env.Engine.Record(ctx, req)
				second <- err
			}()
			time.Sleep(100 * time.Millisecond) // the resend looks for its events, finds none, and queues
			close(g.release)
			if err := <-second; err != nil {
				t.Fatalf("the resend of a record that landed: %v; want its answer", err)
			}
			if len(resp.Appended) != 1 || resp.Appended[0].Name != "charge" || resp.LastSeq != task.LastSeq+1 {
				t.Fatalf("the resend's answer: %+v; want the step that landed", resp)
			}
			if evs := env.History(task.RunID); len(evs) != 2 {
				t.Fatalf("history has %d events; want the step once", len(evs))
			}
		})
	}
}

// A resent hand-back whose first send never reached the engine is applied: it writes no event,
// so the history has nothing to show it landed, and on a store answering an empty read with an
// empty slice it was answered as landed while the run stayed running under the worker that let
// it go, until its lease lapsed.
func TestAResentHandBackThatNeverLandedIsApplied(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		ctx := t.Context()
		task := claimFor(t, env, "w", "q")
		release := frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w", LeaseToken: task.LeaseToken,
			AfterSeq: task.LastSeq, Retry: true, Commands: []frontend.Command{{Kind: frontend.CmdRelease}}}
		if _, err := env.Engine.Record(ctx, release); err != nil {
			t.Fatalf("the resent hand-back: %v", err)
		}
		if run, _ := env.Engine.GetRun(ctx, task.RunID); run.State != store.StateReady {
			t.Fatalf("after the hand-back the run is %s; want ready", run.State)
		}
		// Sent once more (its answer lost again): answered, the run as the first one left it.
		resp, err := env.Engine.Record(ctx, release)
		if err != nil || resp.State != string(store.StateReady) {
			t.Fatalf("the hand-back sent again: %+v, %v; want answered, ready", resp, err)
		}
	})
}
