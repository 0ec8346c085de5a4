package scheduler_test

import (
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/scheduler"
)

// "localtime" and "posixrules" are files of a machine's zoneinfo directory, not IANA zones:
// time.LoadLocation reads that directory before the embedded database, so on a machine that has
// them they load as the machine's own zone (a link to /etc/localtime) and its default rules.
// Taken, a schedule's hours would depend on the machine that leads, as with "Local", and the
// declaration would be valid on one machine and refused on another. Both are refused, in Define
// and in Validate (a worker's declaration), with X_JOB_DEFINITION.
func TestMachineZoneFilesAreRefused(t *testing.T) {
	t.Parallel()
	for _, tz := range []string{"localtime", "posixrules", "LocalTime", "Local"} {
		if _, err := time.LoadLocation(tz); err == nil {
			t.Logf("%q loads on this machine", tz)
		}
		_, err := scheduler.Define("nightly", pingJob, "0 3 * * *", tz, Ping{})
		if !jobs.HasCode(err, jobs.CodeJobDefinition) {
			t.Errorf("Define with tz %q: %v, want X_JOB_DEFINITION", tz, err)
		}
		remote := scheduler.Schedule{Name: "nightly", Spec: "0 3 * * *", TZ: tz, Job: "ping", NoTenant: true}
		if err := remote.Validate(); !jobs.HasCode(err, jobs.CodeJobDefinition) {
			t.Errorf("Validate with tz %q: %v, want X_JOB_DEFINITION", tz, err)
		}
	}
	// Real IANA zones, links included, are still taken.
	for _, tz := range []string{"UTC", "Etc/UTC", "Europe/Berlin", "America/Bogota", "US/Eastern"} {
		if _, err := scheduler.Define("nightly", pingJob, "0 3 * * *", tz, Ping{}); err != nil {
			t.Errorf("Define with tz %q: %v", tz, err)
		}
	}
}
