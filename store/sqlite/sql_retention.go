package sqlite

// Retention (see retention.go). The cut-offs arrive as encoded times; a zero cut-off is minTime,
// which no finished_at is below, so that state is kept. finished_at > minTime skips the live runs
// at the head of runs_finished (their finished_at is minTime); ? 1 is the latest cut-off. A child
// whose parent has not ended for good is kept: a live or blocked parent may still wait for it,
// and so may a failed one once an operator retries it (a dead letter is kept for that retry).
// Only a completed or cancelled parent frees its children.
const (
	sqlRetentionEligible = `(finished_at > -9223372036854775808 AND finished_at < ?1
		AND ((state = 'completed' AND finished_at < ?2) OR (state = 'failed' AND finished_at < ?3)
		  OR (state = 'cancelled' AND finished_at < ?4))
		AND NOT EXISTS (SELECT 1 FROM dedupe d WHERE d.run_id = runs.id AND d.created_at >= ?5)
		AND NOT EXISTS (SELECT 1 FROM children c JOIN runs p ON p.id = c.parent_id
		  WHERE c.child_id = runs.id AND p.state NOT IN ('completed', 'cancelled')))`
	sqlRetentionCandidates = `SELECT ` + runCols + ` FROM runs WHERE ` + sqlRetentionEligible + `
		ORDER BY finished_at, id LIMIT ?6`
	sqlRetentionCheck = `SELECT count(*) FROM runs WHERE id = ?6 AND ` + sqlRetentionEligible

	sqlRetentionHistory    = `DELETE FROM history WHERE run_id = ?`
	sqlRetentionTimers     = `DELETE FROM timers WHERE run_id = ?`
	sqlRetentionWaits      = `DELETE FROM waits WHERE run_id = ?`
	sqlRetentionDeliveries = `DELETE FROM deliveries WHERE run_id = ?`
	sqlRetentionDedupe     = `DELETE FROM dedupe WHERE run_id = ?`
	// A run's link to its parent is its own (by the children's primary key); a link naming it
	// as the parent stays with its child, which may still be live.
	sqlRetentionChildLink = `DELETE FROM children WHERE child_id = ?`
	sqlRetentionRun       = `DELETE FROM runs WHERE id = ?`
)

func init() {
	writeStatements = append(writeStatements, sqlRetentionCheck, sqlRetentionHistory,
		sqlRetentionTimers, sqlRetentionWaits, sqlRetentionDeliveries, sqlRetentionDedupe, sqlRetentionChildLink, sqlRetentionRun)
}
