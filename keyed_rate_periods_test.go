package jobs_test

import (
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
)

// Keyed rates of one key declared with different periods all hold: a start is counted under
// each. Picking the "slowest" one alone let a declaration of 59 starts per hour, slower on
// average than 1 per minute, replace it, and 59 starts then fit in one minute. Neither of two
// such rates is tighter than the other, so only holding both keeps a worker from loosening a
// limit another declaration holds.
func TestKeyedRatesOfOneKeyWithDifferentPeriodsAllHold(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) { keyedRatesOfDifferentPeriods(t, b) })
	}
}

func keyedRatesOfDifferentPeriods(t *testing.T, b testenv.Backend) {
	env := testenv.Start(t, testenv.Options{Store: b.Open(t), RequireDeclared: true})
	honest := syncJob(jobs.RateBy(jobs.ByTenant(), 1, time.Minute))
	testenv.Declare(t, env.Engine, "honest", honest)
	testenv.Declare(t, env.Engine, "bursty", syncJob(jobs.RateBy(jobs.ByTenant(), 59, time.Hour)))
	for i := range 4 {
		enqueue(t, env, honest, syncInput{Customer: "a", N: i})
		env.Fake().Advance(time.Millisecond)
	}
	if n := len(pollAll(t, env.Engine, "bursty")); n != 1 {
		t.Fatalf("%d runs of tenant a started within the minute, want 1 (1 per minute)", n)
	}
	// The longer period holds too: with 2 per hour beside 1 per minute, the third start waits
	// for the hour although each minute allows one.
	env2 := testenv.Start(t, testenv.Options{Store: b.Open(t), RequireDeclared: true})
	testenv.Declare(t, env2.Engine, "minute", syncJob(jobs.RateBy(jobs.ByTenant(), 1, time.Minute)))
	testenv.Declare(t, env2.Engine, "hour", syncJob(jobs.RateBy(jobs.ByTenant(), 2, time.Hour)))
	for i := range 4 {
		enqueue(t, env2, honest, syncInput{Customer: "a", N: i})
	}
	started := map[string]bool{}
	for range 4 {
		for _, task := range pollAll(t, env2.Engine, "minute") {
			started[task.RunID] = true
			complete(t, env2.Engine, "minute", task)
		}
		env2.Advance(time.Minute)
	}
	if len(started) != 2 {
		t.Fatalf("%d runs of tenant a started within four minutes, want 2 (2 per hour)", len(started))
	}
}
