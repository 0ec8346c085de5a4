package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs/store"
)

// claimFair is RunClaim in the fair order (store/flow.go): one statement in one round trip.
//
// It runs with JIT off. The planner cannot know how many rows each lane's LIMIT keeps (it is
// computed per lane), so on a large table it guesses a costly plan and JIT-compiles it: 300 ms of
// compilation for a claim that executes in under a millisecond. The statement is sent in a
// pipelined BEGIN; SET LOCAL; …; COMMIT, so turning JIT off costs no extra round trip and touches
// no other statement.
func (s *Store) claimFair(ctx context.Context, p store.ClaimParams, queues []string) ([]store.Run, error) {
	cursors, has := make([]string, len(queues)), make([]bool, len(queues))
	for i, q := range queues {
		cursors[i], has[i] = p.Rotation[q]
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL jit = off")
	b.Queue(s.render(sqlClaimFair), queues, p.WorkerID, p.StickyBefore, p.Limit, ts(p.LeaseUntil), p.Now,
		cursors, has)
	b.Queue("COMMIT")
	br := s.pool.SendBatch(ctx, b)
	out, err := readFairClaim(br)
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

func readFairClaim(br pgx.BatchResults) ([]store.Run, error) {
	for range 2 { // BEGIN, SET LOCAL
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	byID := map[string]*store.Run{}
	var order []string
	if err := collectRuns(rows, byID, &order); err != nil {
		return nil, err
	}
	// COMMIT: the claim counts only once it has committed.
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	out := make([]store.Run, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out, nil
}
