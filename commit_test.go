package jobs_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// faultyStore injects the fault a network gives a committer: the connection drops after COMMIT
// was sent, so the caller cannot know whether the transaction landed.
type faultyStore struct {
	store.Store
	mu sync.Mutex
	// faults[i] is the fault of the i-th RunApply call: "" none, "after" (it commits, then the
	// error), "before" (nothing commits, then the error).
	faults []string
	calls  int
}

var errConnLost = jobs.Errorf(jobs.CodeCommitUnknown, "connection reset after COMMIT was sent")

func (f *faultyStore) RunApply(ctx context.Context, ms []store.Mutation) ([]store.MutationResult, error) {
	f.mu.Lock()
	fault := ""
	if f.calls < len(f.faults) {
		fault = f.faults[f.calls]
	}
	f.calls++
	f.mu.Unlock()
	switch fault {
	case "before":
		return nil, errConnLost
	case "after":
		if _, err := f.Store.RunApply(ctx, ms); err != nil {
			return nil, err
		}
		return nil, errConnLost
	}
	return f.Store.RunApply(ctx, ms)
}

func TestCommitWithUnknownOutcomeRecordsEachStepOnce(t *testing.T) {
	for _, b := range testenv.Backends() {
		for _, fault := range []string{"after", "before"} {
			t.Run(b.Name+"/"+fault, func(t *testing.T) {
				// Faults on the first three commits: the steps "one", "two" and "three".
				fs := &faultyStore{Store: b.Open(t), faults: []string{fault, fault, fault}}
				env := testenv.Start(t, testenv.Options{Store: fs})
				var runs [3]atomic.Int32
				j := jobs.MustDefine("flaky-network", func(int) string { return "k" }, jobs.NoTenant[int](),
					func(c *jobs.Ctx, in int) (int, error) {
						for i, name := range []string{"one", "two", "three"} {
							if _, err := jobs.Step(c, name, func(context.Context) (int, error) { return int(runs[i].Add(1)), nil }); err != nil {
								return 0, err
							}
						}
						return 3, nil
					})
				env.Worker(worker.Config{}, j)
				id := enqueue(t, env, j, 1)
				env.Await(id, store.StateCompleted)
				for _, name := range []string{"one", "two", "three"} {
					if n := countKind(env, id, "StepCompleted:"+name); n != 1 {
						t.Fatalf("step %s recorded %d times: %v", name, n, testenv.Kinds(env.History(id)))
					}
				}
				for i := range runs {
					if runs[i].Load() != 1 {
						t.Fatalf("step %d ran %d times; a lost commit must be recovered, not re-run", i+1, runs[i].Load())
					}
				}
			})
		}
	}
}
