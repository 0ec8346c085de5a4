package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/replay"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// sleeper defines the same job with a sleep of d, named (Sleep) or derived from d (SleepFor).
func sleeper(named bool, d time.Duration) *jobs.Job[orgInput, string] {
	return jobs.MustDefine("grace", func(in orgInput) string { return in.OrgID }, jobs.NoTenant[orgInput](),
		func(ctx *jobs.Ctx, in orgInput) (string, error) {
			var err error
			if named {
				err = jobs.Sleep(ctx, "grace-period", d)
			} else {
				err = jobs.SleepFor(ctx, d)
			}
			if err != nil {
				return "", err
			}
			return "done", nil
		})
}

// Changing a sleep's duration in a deploy: a run asleep under the old code replays against the
// new one when the sleep is named, and diverges when its name came from the duration. This is
// why the documented form is the named Sleep.
func TestChangingASleepsDurationReplaysOnlyWhenNamed(t *testing.T) {
	t.Parallel()
	for _, named := range []bool{true, false} {
		env := newEnv(t)
		old := sleeper(named, 72*time.Hour)
		env.Worker(worker.Config{}, old)
		run, err := old.Enqueue(context.Background(), env.Engine, orgInput{OrgID: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		env.Await(run.RunID, store.StateSuspended)
		err = replay.Check(context.Background(), sleeper(named, 48*time.Hour), env.History(run.RunID))
		switch {
		case named && err != nil:
			t.Errorf("named sleep, duration changed: %v, want a clean replay", err)
		case !named && !jobs.HasCode(err, jobs.CodeReplayDiverged):
			t.Errorf("SleepFor, duration changed: %v, want X_REPLAY_DIVERGED", err)
		}
	}
}
