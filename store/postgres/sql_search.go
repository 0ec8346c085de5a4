package postgres

// The run search is assembled from the fragments below: only the filters present go into the
// WHERE clause, so the planner sees plain equalities and picks the index that serves them
// (002_run_search) rather than a generic plan behind "($1 = ” OR x = $1)". Each fragment's
// %d is its parameter's position. The fragments are fixed; only the subset varies, so pgx's
// statement cache holds a bounded number of texts. The tenant fragment, added only for a named
// tenant, also says that it is not empty: runs_tenant_id holds only tenanted runs
// (014_bulk_indexes), and a generic plan, the value unknown, proves that index's predicate only
// from this condition.
const (
	sqlSearchHead = `SELECT {RUN} FROM {S}.runs WHERE true`
	sqlSearchTail = ` ORDER BY id DESC LIMIT $%d`

	sqlSearchQueue       = ` AND queue = $%d`
	sqlSearchState       = ` AND state = $%d`
	sqlSearchJob         = ` AND job = $%d`
	sqlSearchTenant      = ` AND tenant = $%d AND tenant <> ''`
	sqlSearchKey         = ` AND key = $%d`
	sqlSearchBefore      = ` AND id < $%d`
	sqlSearchCreatedFrom = ` AND created_at >= $%d`
	sqlSearchCreatedTo   = ` AND created_at < $%d`

	// sqlFinishedCounts buckets finished runs by whole widths from $1 (numeric arithmetic on
	// the epoch, exact to the microsecond); runs_finished serves the range.
	sqlFinishedCounts = `
SELECT queue, state, floor(extract(epoch FROM finished_at - $1::timestamptz) * 1000000 / $2::bigint)::bigint AS bucket,
	count(*)
FROM {S}.runs
WHERE finished_at >= $1 AND state IN ('completed', 'failed', 'cancelled')
GROUP BY queue, state, bucket
ORDER BY queue, state, bucket`
)
