package jobs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// With LogRuns the engine logs one readable line per run that finishes, completed or cancelled;
// without it, none.
func TestEngineLogsOneLinePerFinishedRun(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		logs := &testenv.LogBuffer{}
		env := testenv.Start(t, testenv.Options{Store: memory.New(), Logger: logs.Logger(), LogRuns: on})
		j := jobs.MustDefine("greet", func(in string) string { return in }, jobs.NoTenant[string](),
			func(c *jobs.Ctx, in string) (string, error) { return "hi " + in, nil })
		env.Worker(worker.Config{}, j)
		done, err := j.Enqueue(t.Context(), env.Engine, "ann")
		if err != nil {
			t.Fatal(err)
		}
		env.Await(done.RunID, store.StateCompleted)
		req, err := j.Request("bob")
		if err != nil {
			t.Fatal(err)
		}
		req.Delay = time.Hour // still waiting when it is cancelled
		later, err := env.Engine.Enqueue(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.Engine.Cancel(t.Context(), later.RunID, "not needed"); err != nil {
			t.Fatal(err)
		}
		out := logs.String()
		completed := strings.Contains(out, "msg=jobs.run.finished run="+done.RunID+" job=greet queue=default state=completed attempt=1")
		cancelled := strings.Contains(out, "msg=jobs.run.finished run="+later.RunID+" job=greet queue=default state=cancelled")
		if completed != on || cancelled != on {
			t.Errorf("LogRuns %v: completed line %v, cancelled line %v:\n%s", on, completed, cancelled, out)
		}
	}
}
