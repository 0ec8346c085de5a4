package sqlite

// The fair claim (flow.go). All walk runs_lanes; the claim-time expression is written exactly as
// the index's, so the planner uses it.
const (
	// sqlLaneFirst and sqlLaneNext find a queue's first tenant with a ready run, and the next
	// one after :after: one index seek each.
	sqlLaneFirst = `SELECT tenant FROM runs
		WHERE queue = :queue AND state = 'ready'
		ORDER BY tenant LIMIT 1`
	sqlLaneNext = `SELECT tenant FROM runs
		WHERE queue = :queue AND state = 'ready' AND tenant > :after
		ORDER BY tenant LIMIT 1`

	// sqlLaneHead reads a lane's first claimable runs in claim order after (:after_at,
	// :after_id) (the lowest claim time and "" for its head; where a first take stopped, for a
	// top-up: the claim time bound is the index's seek, which a row value would not be),
	// skipping runs parked for another worker whose sticky window has not passed
	// (:workers, a JSON array, are the claim's workers).
	sqlLaneHead = `SELECT id, ready_at - priority * 60000000000, ready_at, worker_id FROM runs
		WHERE queue = :queue AND state = 'ready' AND tenant = :tenant
		  AND ready_at - priority * 60000000000 >= :after_at
		  AND (ready_at - priority * 60000000000 > :after_at OR id > :after_id)
		  AND (worker_id = '' OR ready_at <= :sticky_before OR worker_id IN (SELECT value FROM json_each(:workers)))
		ORDER BY ready_at - priority * 60000000000, id
		LIMIT :limit`
)
