package jobs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// A cancelled run's trace does not show its wait as still waiting: the wait ended with the
// cancel, and says why.
func TestCancelledRunsTraceEndsItsWait(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		j := jobs.MustDefine("approve", func(in string) string { return in }, jobs.NoTenant[string](),
			func(c *jobs.Ctx, in string) (string, error) {
				_, _, err := jobs.WaitForEvent[string](c, "approval", "approved", jobs.Match{"id": in}, time.Hour)
				return "", err
			})
		env.Worker(worker.Config{}, j)
		res, err := j.Enqueue(t.Context(), env.Engine, "a1")
		if err != nil {
			t.Fatal(err)
		}
		env.Await(res.RunID, store.StateSuspended)
		if _, err := env.Engine.Cancel(t.Context(), res.RunID, "by ops: order withdrawn"); err != nil {
			t.Fatal(err)
		}
		v, err := env.Engine.InspectRun(t.Context(), res.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Steps) != 1 {
			t.Fatalf("steps %+v", v.Steps)
		}
		s := v.Steps[0]
		if s.Kind != "wait" || s.Status != "cancelled" || s.Ended == nil || !strings.Contains(s.Note, "order withdrawn") {
			t.Errorf("the cancelled run's wait reads %+v", s)
		}
	})
}
