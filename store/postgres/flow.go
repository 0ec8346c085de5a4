package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs/store"
)

// claimFair is RunClaim in the fair order (store/flow.go): one statement in one round trip.
//
// It is sent as one pipeline, settings then the claim, in the pipeline's implicit transaction
// (sendImplicit; no BEGIN or COMMIT statements, which cost the server a statement each for
// nothing), so its settings cost no extra round trip and touch no other statement
// (set_config(…, true) is SET LOCAL and ends with that transaction):
//
//   - plan_cache_mode = force_generic_plan. The statement is planned once per connection instead
//     of on every claim. A custom plan cost more CPU to make (about 0.5 ms: a recursive walk,
//     windows, laterals) than the claim took to run, and was the larger part of fair claiming's
//     cost over the plain claim. The statement is written so that its generic plan is the right
//     one whatever the parameters: every read is an index probe bounded by the lane's LIMIT, and
//     the final UPDATE finds its rows through id = ANY (ARRAY(…)), which a plan without the
//     limit's value still does through the primary key.
//   - enable_seqscan and enable_bitmapscan off. A generic plan is kept until the table's
//     statistics change; one made while the table was nearly empty must not be a sequential
//     scan that the next 50,000 runs would make ruinous.
//   - jit off. The planner cannot know how many rows each lane's LIMIT keeps, so on a large
//     table it guesses a costly plan and JIT-compiles it: 300 ms of compilation for a claim
//     that executes in about a millisecond.
//   - synchronous_commit off, on a session that holds a fence epoch (sqlClaimCommit): the claim
//     does not wait for its WAL flush; epoch.go says why that is safe.
func (s *Store) claimFair(ctx context.Context, p store.ClaimParams, queues []string, limit int, workers []string,
	limits []int32) ([]store.Run, error) {
	cursors, has := make([]string, len(queues)), make([]bool, len(queues))
	for i, q := range queues {
		cursors[i], has[i] = p.Rotation[q]
	}
	b := &pgx.Batch{}
	b.Queue(s.render(sqlClaimFairSettings))
	if len(p.Shares) > 0 {
		b.Queue(s.render(sqlClaimFairShared), queues, workers, p.StickyBefore, limit, ts(p.LeaseUntil), p.Now,
			cursors, has, limits)
	} else {
		b.Queue(s.render(sqlClaimFair), queues, workers, p.StickyBefore, limit, ts(p.LeaseUntil), p.Now,
			cursors, has)
	}
	br := s.pool.SendBatch(ctx, b)
	out, err := readClaim(br, nil)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, unavailable("run claim", err)
	}
	// UPDATE … RETURNING gives no order.
	store.ClaimOrder(out, p)
	return out, nil
}

// readClaim reads a claim's pipeline: its settings, then the claimed runs, appended to out.
func readClaim(br pgx.BatchResults, out []store.Run) ([]store.Run, error) {
	if _, err := br.Exec(); err != nil { // the settings
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	// The claim counts only once it has committed: at the pipeline's Sync, whose answer the
	// caller's Close reads.
	return appendRuns(rows, out)
}
