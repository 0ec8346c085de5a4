package replay_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/jobstest"
	"github.com/ultimat3/jobs/replay"
)

// A history whose body went on past a failed step (StepFailed, a sleep, the step tried again,
// completed) checked against code that now returns that failure instead: the code makes one of
// the recorded calls and stops, which is a divergence (a run asleep at "pause" would fail its
// attempts on the new code instead of being blocked), as the same code returning success there
// is. An error returned where the history also ends stays the body's business.
func TestCheckRefusesCodeThatFailsWhereTheHistoryWentOn(t *testing.T) {
	t.Parallel()
	tries := 0
	charge := func(context.Context) (string, error) {
		tries++
		if tries == 1 {
			return "", jobs.Errorf(jobs.CodeStepTimeout, "gateway slow")
		}
		return "charged", nil
	}
	old := jobs.MustDefine("charge-again", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) {
			if _, err := jobs.Step(c, "charge", charge); err != nil {
				// went on past the failure: wait, try again
				if err := jobs.Sleep(c, "pause", time.Minute); err != nil {
					return "", err
				}
				if _, err := jobs.Step(c, "charge", charge); err != nil {
					return "", err
				}
			}
			return "done", nil
		})
	env := jobstest.New(t, jobstest.Options{}, old)
	id := jobstest.Enqueue(env, old, "a")
	env.RunToCompletion(id)
	env.AssertCompleted(id)
	var buf bytes.Buffer
	if err := history.Dump(&buf, env.History(id)); err != nil {
		t.Fatal(err)
	}
	events, err := history.Load(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if err := replay.Check(t.Context(), old, events); err != nil {
		t.Fatalf("the unchanged code: %v", err)
	}

	// The new code no longer goes on past the failure: it returns it.
	newer := jobs.MustDefine("charge-again", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) {
			if _, err := jobs.Step(c, "charge", charge); err != nil {
				return "", err
			}
			return "done", nil
		})
	if err := replay.Check(t.Context(), newer, events); !jobs.HasCode(err, jobs.CodeReplayDiverged) {
		t.Errorf("replay.Check of %v against code that stops at the first recorded call: %v; want X_REPLAY_DIVERGED",
			jobstest.Kinds(events), err)
	}
}

// Check replays a history as the attempt that wrote its last events: a body that fails its first
// attempt before any durable call and goes on in the next is checked as that next attempt, not
// as attempt 1 (which would return the error where the history goes on).
func TestCheckReplaysAsTheHistorysLastAttempt(t *testing.T) {
	t.Parallel()
	flaky := jobs.MustDefine("second-try", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) {
			if c.Run().Attempt == 1 {
				return "", jobs.Errorf("X_WARMING_UP", "first attempt")
			}
			if _, err := jobs.Step(c, "work", func(context.Context) (string, error) { return "ok", nil }); err != nil {
				return "", err
			}
			return "done", nil
		}, jobs.Retry(jobs.RetryPolicy{Attempts: 3, Backoff: jobs.Fixed, Delay: time.Second}))
	env := jobstest.New(t, jobstest.Options{}, flaky)
	id := jobstest.Enqueue(env, flaky, "a")
	env.RunToCompletion(id)
	env.AssertCompleted(id)
	if err := replay.Check(t.Context(), flaky, env.History(id)); err != nil {
		t.Fatalf("replay.Check of the run's own history: %v", err)
	}
}
