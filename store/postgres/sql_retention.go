package postgres

// Retention (see retention.go). Rendered per schema with render, like sql_dedupe.go. $1 is the
// latest cut-off, so the scan walks runs_finished from its oldest entry; $2…$4 are the cut-offs
// per state (the zero time keeps a state: no finished_at is before it); $5 protects the runs a
// dedupe id inside its window names. A child whose parent has not ended for good is kept: a live
// or blocked parent may still wait for it, and so may a failed one once an operator retries it
// (a dead letter is kept for that retry), and it reads the child's outcome from its row. Only a
// completed or cancelled parent frees its children.
const (
	sqlRetentionEligible = `r.finished_at < $1
	AND ((r.state = 'completed' AND r.finished_at < $2) OR (r.state = 'failed' AND r.finished_at < $3)
	  OR (r.state = 'cancelled' AND r.finished_at < $4))
	AND NOT EXISTS (SELECT 1 FROM {S}.dedupe d WHERE d.run_id = r.id AND d.created_at >= $5)
	AND NOT EXISTS (SELECT 1 FROM {S}.children c JOIN {S}.runs p ON p.id = c.parent_id
	  WHERE c.child_id = r.id AND p.state NOT IN ('completed', 'cancelled'))`

	sqlRetentionCandidates = `SELECT {RUN_R} FROM {S}.runs r WHERE ` + sqlRetentionEligible + `
ORDER BY r.finished_at, r.id LIMIT $6`

	// sqlRetentionDelete is one statement, so one short transaction: it locks the batch's runs
	// that are still eligible, skipping any another transaction holds (an operator's retry, a
	// late cancel: checked again next sweep), and deletes them with all that is theirs. The
	// re-check under the lock is what keeps a run retried since it was listed. The events
	// deleted are counted by the runs' last seqs (a history is contiguous from 1), not by the
	// history rows: a run's RunStarted may live in its row (implied.go). A run's link to its
	// parent goes with it (by the children's primary key); a link naming it as the parent stays
	// with its child, which may still be live, and goes when that child does.
	sqlRetentionDelete = `WITH doomed AS (
	SELECT r.id FROM {S}.runs r WHERE r.id = ANY($6::text[]) AND ` + sqlRetentionEligible + `
	FOR UPDATE SKIP LOCKED
), h AS (
	DELETE FROM {S}.history WHERE run_id IN (SELECT id FROM doomed)
), t AS (
	DELETE FROM {S}.timers WHERE run_id IN (SELECT id FROM doomed)
), w AS (
	DELETE FROM {S}.waits WHERE run_id IN (SELECT id FROM doomed)
), dl AS (
	DELETE FROM {S}.deliveries WHERE run_id IN (SELECT id FROM doomed)
), dd AS (
	DELETE FROM {S}.dedupe WHERE run_id IN (SELECT id FROM doomed)
), cl AS (
	DELETE FROM {S}.children WHERE child_id IN (SELECT id FROM doomed)
), gone AS (
	DELETE FROM {S}.runs WHERE id IN (SELECT id FROM doomed) RETURNING id, last_seq
)
SELECT coalesce((SELECT array_agg(id ORDER BY id) FROM gone), '{}'::text[]),
	(SELECT coalesce(sum(last_seq), 0)::bigint FROM gone)`
)
