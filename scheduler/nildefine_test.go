package scheduler_test

import (
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/scheduler"
)

// A nil job, a nil *jobs.Job (a Define whose error was dropped) and a nil option are refused at
// declaration with X_JOB_DEFINITION, as jobs.Define refuses a nil option, never a panic.
func TestDefineRefusesNilJobsAndOptions(t *testing.T) {
	t.Parallel()
	var typedNil *jobs.Job[Ping, string]
	for name, define := range map[string]func() (scheduler.Schedule, error){
		"nil job":       func() (scheduler.Schedule, error) { return scheduler.Define("s", nil, "@hourly", "UTC", Ping{}) },
		"nil *jobs.Job": func() (scheduler.Schedule, error) { return scheduler.Define("s", typedNil, "@hourly", "UTC", Ping{}) },
		"nil option": func() (scheduler.Schedule, error) {
			return scheduler.Define("s", pingJob, "@hourly", "UTC", Ping{Note: "n"}, scheduler.MaxCatchUp(3), nil)
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panicked: %v", r)
				}
			}()
			if _, err := define(); !jobs.HasCode(err, jobs.CodeJobDefinition) {
				t.Fatalf("got %v, want X_JOB_DEFINITION", err)
			}
		})
	}
}
