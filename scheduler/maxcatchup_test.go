package scheduler_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store/memory"
)

// maxCatchUp is how many runs one round may create for a schedule, and a round creates them in
// one ScheduleFire transaction: it is bounded as a bulk enqueue, one transaction too, is
// (jobs.MaxEnqueueMany). Unbounded, one declaration of "@every 1s" under run-all with a huge cap
// made the round after an outage create every missed second's run in one transaction: 21,600
// runs and 70 MB for six hours down, a week's 604,800 for a week, on every node that took the
// lead after the one that ran out of memory. The bound is refused at Define and in Validate
// (a worker's declaration), which then shows in Inspect with its error while the others run.
func TestMaxCatchUpIsBoundedAsOneTransaction(t *testing.T) {
	t.Parallel()
	if _, err := scheduler.Define("s", pingJob, "@every 1s", "UTC", Ping{}, scheduler.MaxCatchUp(jobs.MaxEnqueueMany)); err != nil {
		t.Errorf("MaxCatchUp(%d): %v", jobs.MaxEnqueueMany, err)
	}
	for _, n := range []int{jobs.MaxEnqueueMany + 1, 1 << 40} {
		if _, err := scheduler.Define("s", pingJob, "@every 1s", "UTC", Ping{}, scheduler.MaxCatchUp(n)); !jobs.HasCode(err, jobs.CodeJobDefinition) {
			t.Errorf("MaxCatchUp(%d): %v, want X_JOB_DEFINITION", n, err)
		}
		remote := scheduler.Schedule{Name: "s", Spec: "@every 1s", TZ: "UTC", Job: "ping", NoTenant: true,
			Policy: scheduler.RunAll, MaxCatchUp: n}
		if err := remote.Validate(); !jobs.HasCode(err, jobs.CodeJobDefinition) {
			t.Errorf("Validate with maxCatchUp %d: %v, want X_JOB_DEFINITION", n, err)
		}
	}

	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	huge := scheduler.Schedule{Name: "huge", Spec: "@every 1s", TZ: "UTC", Job: "ping", NoTenant: true,
		Policy: scheduler.RunAll, MaxCatchUp: 1 << 40}
	s := start(t, env, "a", huge, define(t, "hourly", "0 * * * *", "UTC"))
	tick(t, s)
	all, err := s.Inspect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Name != "hourly" || all[0].Error != "" || all[0].Watermark == nil ||
		all[1].Name != "huge" || !strings.Contains(all[1].Error, "maxCatchUp") {
		t.Errorf("Inspect = %+v", all)
	}
}
