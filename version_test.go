package jobs_test

import (
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// A run asleep before a change point when the change is deployed has not passed it: it wakes
// into the new code and records the new version. A run that recorded a version the code no
// longer carries is blocked with X_REPLAY_DIVERGED, not run down another branch.
func TestVersionAcrossADeploy(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			define := func(min, max int, changed bool) *jobs.Job[string, int] {
				return jobs.MustDefine("renew", func(in string) string { return in }, jobs.NoTenant[string](),
					func(c *jobs.Ctx, in string) (int, error) {
						if err := jobs.SleepFor(c, time.Hour); err != nil {
							return 0, err
						}
						if !changed {
							return jobs.DefaultVersion, nil
						}
						v, err := jobs.Version(c, "renew-v2", min, max)
						if err != nil {
							return 0, err
						}
						again, _ := jobs.Version(c, "renew-v2", min, max)
						if again != v {
							return 0, jobs.Errorf(jobs.CodeInvariant, "asked twice: %d then %d", v, again)
						}
						return v, nil
					})
			}
			old := env.Worker(worker.Config{}, define(0, 0, false))
			res, err := define(0, 0, false).Enqueue(t.Context(), env.Engine, "a")
			if err != nil {
				t.Fatal(err)
			}
			env.Await(res.RunID, store.StateSuspended)
			if err := old.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
			newer := env.Worker(worker.Config{StickyRuns: -1}, define(jobs.DefaultVersion, 2, true))
			env.Advance(time.Hour)
			run := env.Await(res.RunID, store.StateCompleted)
			var v int
			if err := jobs.Decode(run.Result, &v); err != nil || v != 2 {
				t.Fatalf("the woken run took version %d (%v), want 2: it had not passed the change point", v, err)
			}
			marks := 0
			for _, ev := range env.History(res.RunID) {
				if ev.Kind == history.KindVersionMarked {
					marks++
				}
			}
			if marks != 1 {
				t.Errorf("%d VersionMarked events, want 1 (a second ask is not recorded)", marks)
			}

			// A run that recorded version 2, then meets code that dropped that branch.
			early := func(min, max int) *jobs.Job[string, int] {
				return jobs.MustDefine("renew-early", func(in string) string { return in }, jobs.NoTenant[string](),
					func(c *jobs.Ctx, in string) (int, error) {
						v, err := jobs.Version(c, "renew-v2", min, max)
						if err != nil {
							return 0, err
						}
						return v, jobs.SleepFor(c, time.Hour)
					})
			}
			if err := newer.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
			w := env.Worker(worker.Config{StickyRuns: -1}, early(0, 2))
			res2, err := early(0, 2).Enqueue(t.Context(), env.Engine, "b")
			if err != nil {
				t.Fatal(err)
			}
			env.Await(res2.RunID, store.StateSuspended)
			if err := w.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
			env.Worker(worker.Config{StickyRuns: -1}, early(3, 3))
			env.Advance(time.Hour)
			blocked := env.Await(res2.RunID, store.StateBlocked, store.StateCompleted)
			if blocked.State != store.StateBlocked || blocked.ErrorCode != string(jobs.CodeReplayDiverged) {
				t.Errorf("the run is %s (%s), want blocked with X_REPLAY_DIVERGED", blocked.State, blocked.ErrorCode)
			}
		})
	}
}
