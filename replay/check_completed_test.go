package replay_test

import (
	"context"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/jobstest"
	"github.com/ultimat3/jobs/replay"
)

// A history that records the run's completion, checked against code that now returns an error
// (or panics) where the old code returned its result: every run reaching that point would now
// fail where it completed, which the deploy test reports as X_REPLAY_DIVERGED, as it reports a
// call the code now adds there. Before, the error was passed as the body's business. An error
// at the end of a history that does not record a completion stays the body's business.
func TestCheckRefusesCodeThatFailsWhereTheHistoryCompleted(t *testing.T) {
	t.Parallel()
	step := func(c *jobs.Ctx) (int, error) {
		return jobs.Step(c, "price", func(context.Context) (int, error) { return 7, nil })
	}
	old := jobs.MustDefine("quote", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, _ string) (int, error) { return step(c) })
	env := jobstest.New(t, jobstest.Options{}, old)
	id := jobstest.Enqueue(env, old, "a")
	env.RunToCompletion(id)
	env.AssertCompleted(id)
	events := env.History(id)
	if last := events[len(events)-1]; last.Kind != history.KindRunCompleted {
		t.Fatalf("history %v does not end with its completion", jobstest.Kinds(events))
	}
	if err := replay.Check(t.Context(), old, events); err != nil {
		t.Fatalf("the unchanged code: %v", err)
	}

	for name, body := range map[string]func(*jobs.Ctx, string) (int, error){
		"returns an error": func(c *jobs.Ctx, _ string) (int, error) {
			v, err := step(c)
			if err == nil && v > 5 {
				err = jobs.Errorf("X_PRICE_TOO_HIGH", "price %d over the new ceiling", v)
			}
			return v, err
		},
		"panics": func(c *jobs.Ctx, _ string) (int, error) {
			v, err := step(c)
			if err == nil && v > 5 {
				panic("over the new ceiling")
			}
			return v, err
		},
	} {
		newer := jobs.MustDefine("quote", func(s string) string { return s }, jobs.NoTenant[string](), body)
		if err := replay.Check(t.Context(), newer, events); !jobs.HasCode(err, jobs.CodeReplayDiverged) {
			t.Errorf("code that %s where the history completed: %v; want X_REPLAY_DIVERGED", name, err)
		}
		// The same history without its completion (the run still in flight after the step):
		// the code's error there is the body's business, as it is live.
		if err := replay.Check(t.Context(), newer, events[:len(events)-1]); err != nil {
			t.Errorf("code that %s where the history ends unfinished: %v; want nil", name, err)
		}
	}
}
