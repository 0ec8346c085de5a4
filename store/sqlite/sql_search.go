package sqlite

// The run search is assembled from the fragments below: only the filters present go into the
// WHERE clause, so SQLite's planner sees plain equalities and picks the index that serves them
// (002_run_search) instead of scanning behind "(:x = ” OR x = :x)". The fragments are fixed;
// only the subset varies, so the statement cache holds a bounded number of texts.
const (
	sqlSearchHead = `SELECT ` + runCols + ` FROM runs WHERE 1 = 1`
	sqlSearchTail = ` ORDER BY id DESC LIMIT :limit`

	sqlSearchQueue       = ` AND queue = :queue`
	sqlSearchState       = ` AND state = :state`
	sqlSearchJob         = ` AND job = :job`
	sqlSearchTenant      = ` AND tenant = :tenant`
	sqlSearchKey         = ` AND key = :key`
	sqlSearchBefore      = ` AND id < :before`
	sqlSearchCreatedFrom = ` AND created_at >= :created_from`
	sqlSearchCreatedTo   = ` AND created_at < :created_to`

	// sqlFinishedCounts buckets finished runs by integer division of nanoseconds; runs_finished
	// serves the range (an unfinished run's finished_at is the smallest int64, never in range).
	sqlFinishedCounts = `SELECT queue, state, (finished_at - :since) / :width AS bucket, count(*)
		FROM runs
		WHERE finished_at >= :since AND state IN ('completed', 'failed', 'cancelled')
		GROUP BY queue, state, bucket
		ORDER BY queue, state, bucket`
)
