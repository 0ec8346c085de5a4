package systems

import "context"

// Section 8: backfills (our engine only).
const (
	ScenarioBackfill        = "backfill"         // an unthrottled backfill pass over a table of n rows
	ScenarioBackfillOverlap = "backfill-overlap" // the same pass with backfill.OverlapCheckpoints
	ScenarioBackfillLoop    = "backfill-loop"    // a hand-written keyset UPDATE loop over the same table
	ScenarioBackfillResume  = "backfill-resume"  // a pass with n completed pages resumes on a fresh worker
)

// Backfiller is implemented by systems that measure backfills (our engine). Each method does its
// scenario's untimed preparation and returns the part to time.
type Backfiller interface {
	// BackfillPass fills a table of `rows` rows in the run's Postgres database; the Measure
	// sweeps it with a backfill pass at a rate far above what its pages achieve (Units: rows).
	BackfillPass(ctx context.Context, rows int) (Measure, error)
	// BackfillOverlap is BackfillPass with backfill.OverlapCheckpoints: a page's handler starts
	// while the previous page's checkpoint commits (Units: rows).
	BackfillOverlap(ctx context.Context, rows int) (Measure, error)
	// BackfillLoop fills the same table; the Measure sweeps it with a hand-written keyset loop
	// making the same two statements a page (Units: rows).
	BackfillLoop(ctx context.Context, rows int) (Measure, error)
	// BackfillResume writes, through the store API, a pass whose history holds `pages`
	// completed pages and leaves it ready; the Measure starts a worker and returns when the
	// pass completed, every page replayed (Units and Events: the pages).
	BackfillResume(ctx context.Context, pages int) (Measure, error)
}
