package jobs_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// A failure whose retry the engine refuses as sent (here: the worker's clock two days behind
// the engine's puts every retry time before the engine's bound in the past) dead-letters the
// run on that attempt, with the refusal in its error, instead of leaving the claim to lapse and
// fail again, forever.
func TestRetryRefusedByTheEngineDeadLetters(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	j, calls := failing("skewed", jobs.RetryPolicy{Attempts: 3, Backoff: jobs.Fixed, Delay: time.Second}, errors.New("boom"))
	env.Worker(worker.Config{Clock: clock.NewFake(env.Clock.Now().Add(-48 * time.Hour))}, j)
	id := enqueue(t, env, j, 1)
	run := env.Await(id, store.StateFailed)
	if run.StopReason != history.StopTerminal || run.Attempt != 1 || run.ErrorCode != string(jobs.CodeBadRequest) || calls.Load() != 1 {
		t.Fatalf("stop %q at attempt %d with %s after %d calls; want terminal at attempt 1 with X_BAD_REQUEST",
			run.StopReason, run.Attempt, run.ErrorCode, calls.Load())
	}
	for _, want := range []string{"boom", "the engine refused its retry", "retry time", "attempt 1 of 3"} {
		if !strings.Contains(run.Error, want) {
			t.Errorf("the run's error lacks %q: %s", want, run.Error)
		}
	}
}

// A result the engine refuses (over its payload limit) fails the attempt with the refusal, a
// terminal code, instead of leaving the claim to lapse and the run to complete, and be refused,
// again and again.
func TestResultRefusedByTheEngineDeadLetters(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	var calls atomic.Int32
	j := jobs.MustDefine("huge", func(int) string { return "k" }, jobs.NoTenant[int](),
		func(*jobs.Ctx, int) (string, error) {
			calls.Add(1)
			return strings.Repeat("x", 2<<20), nil // the engine's default limit is 1 MiB
		}, jobs.Retry(jobs.RetryPolicy{Attempts: 3}))
	env.Worker(worker.Config{}, j)
	id := enqueue(t, env, j, 1)
	run := env.Await(id, store.StateFailed)
	if run.StopReason != history.StopTerminal || run.Attempt != 1 || run.ErrorCode != string(jobs.CodePayloadTooLarge) || calls.Load() != 1 {
		t.Fatalf("stop %q at attempt %d with %s after %d calls; want terminal at attempt 1 with X_PAYLOAD_TOO_LARGE",
			run.StopReason, run.Attempt, run.ErrorCode, calls.Load())
	}
}
