package scheduler

import (
	"context"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
)

// Declaration is the schedule as a manifest entry. A worker that hosts the schedule's job
// declares it (Registry.Declare), and an engine serving remote workers runs it (FromManifest):
//
//	reg.Declare(scheduler.MustDefine("nightly-digest", Digest, "0 3 * * *", "Europe/Berlin", in).Declaration())
func (s Schedule) Declaration() jobs.Declaration {
	d, err := jobs.NewDeclaration(jobs.DeclareSchedule, s.Name, s.normal())
	if err != nil {
		// Define refused every value that could fail here; an invalid declaration is refused
		// again by Registry.Declare, which validates it.
		return jobs.Declaration{Kind: jobs.DeclareSchedule, Name: s.Name}
	}
	return d
}

// FromManifest is the Provider of an engine serving remote workers: the schedules the fleet's
// live workers declare (engine.DeclaredLive), so a schedule a deploy removed or renamed stops
// once no live worker declares it; with no worker live at all, the set the fleet last declared,
// so a fleet restart loses none. Every declaration is handed over as declared, including one that
// does not validate (a bad zone, a newer worker's shape): the scheduler refuses it as it refuses
// any other, so it is logged (jobs.scheduler.refused) and shows in Inspect with its error while
// the other schedules run. Left out here, a worker's refused schedule would silently not exist.
func FromManifest(eng *engine.Engine) Provider {
	return func(ctx context.Context) ([]Schedule, error) {
		return engine.DeclaredLive[Schedule](ctx, eng, jobs.DeclareSchedule)
	}
}
