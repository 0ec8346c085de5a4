package wrap_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/codec/wrap"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// A result past the Set's deflate bound deflates far under the engine's payload limit, so it was
// stored and the run completed with a result its own Set could not open (nor could a parent's
// replay). Now the record is refused on the worker: the attempt fails with X_ENCODING naming the
// bound, and nothing unreadable is stored.
func TestAResultPastTheDeflateBoundFailsTheAttempt(t *testing.T) {
	t.Parallel()
	const bound = 64 << 10
	set := codec.NewSet(codec.GzipLimit(bound))
	big := jobs.MustDefine("big-result", func(s string) string { return s }, jobs.NoTenant[string](),
		func(_ *jobs.Ctx, s string) (string, error) { return strings.Repeat("a", 2*bound), nil },
		jobs.Queue("big"), jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	env.Worker(worker.Config{Frontend: wrap.Frontend(env.Engine, set)}, big)
	res, err := big.Enqueue(context.Background(), wrap.Enqueuer(env.Engine, set), "x")
	if err != nil {
		t.Fatal(err)
	}
	run := env.Await(res.RunID, store.StateCompleted, store.StateFailed)
	if run.State == store.StateCompleted {
		_, openErr := set.Open(run.Result)
		t.Fatalf("the run completed with a %d-byte result its Set cannot open: %v", len(run.Result), openErr)
	}
	if run.ErrorCode != string(jobs.CodeEncoding) || !strings.Contains(run.Error, "GzipLimit") {
		t.Errorf("failed with %s %q; want X_ENCODING naming the bound", run.ErrorCode, run.Error)
	}
}
