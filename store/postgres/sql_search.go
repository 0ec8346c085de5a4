package postgres

// The run search is assembled from the fragments below: only the filters present go into the
// WHERE clause, so the planner sees plain equalities and picks the index that serves them
// (002_run_search) rather than a generic plan behind "($1 = ” OR x = $1)". Each fragment's
// %d is its parameter's position. The fragments are fixed; only the subset varies, so pgx's
// statement cache holds a bounded number of texts. The tenant fragment, added only for a named
// tenant, also says that it is not empty: runs_tenant_id holds only tenanted runs
// (014_bulk_indexes), and a generic plan, the value unknown, proves that index's predicate only
// from this condition.
//
// The state, job and queue indexes hold no running run (015_claim_entries). A search that may
// read one of them is therefore two branches merged in id order: the runs that are not running
// (sqlSearchNotRunning, written out so that a generic plan proves those indexes' predicate) and
// the running ones (sqlSearchRunningCTE), read whole through runs_lease — they are at most the
// fleet's slots — and sorted. A search by key is the same merge cut along another line: the key
// index holds no live run (016_key_entries), so the branch read apart is the key's live runs,
// through runs_live_key, whose leading column is the key (at most one live run per job and
// tenant), and the other branch says sqlSearchNotLive for runs_key_id's predicate. The branch read apart is
// MATERIALIZED so that the planner cannot trade it for a walk of the primary key that filters on
// state, which it may think cheaper on a table it has no statistics for. Each branch is cut to
// the limit before the merge. A search for running runs is the running branch alone; one by key
// for another live state, the key's live runs alone, the state filtered after the read (so that
// no plan trades runs_live_key for a walk of the state's runs); one for another state, the first
// branch alone (by key, it also says sqlSearchNotLive). A search with none of those filters reads an
// index that holds every run (the primary key, the tenant's) and is one plain query.
const (
	sqlSearchHead = `SELECT {RUN} FROM {S}.runs WHERE true`
	sqlSearchTail = ` ORDER BY id DESC LIMIT $%d`

	sqlSearchNotRunning = ` AND state <> 'running'`
	sqlSearchRunningCTE = `WITH apart AS MATERIALIZED (SELECT {RUN} FROM {S}.runs WHERE state = 'running'%s) `
	sqlSearchNotLive    = ` AND state NOT IN ` + liveStates
	sqlSearchLiveCTE    = `WITH apart AS MATERIALIZED (SELECT {RUN} FROM {S}.runs WHERE state IN ` + liveStates + `%s) `
	sqlSearchApart      = `SELECT {RUN} FROM apart`
	// sqlSearchMerge: %[1]s the branch of the runs not read apart (its WHERE clause complete),
	// %[2]d the limit's position.
	sqlSearchMerge = `SELECT {RUN} FROM ((%[1]s ORDER BY id DESC LIMIT $%[2]d)
	UNION ALL (SELECT {RUN} FROM apart ORDER BY id DESC LIMIT $%[2]d)) u
ORDER BY id DESC LIMIT $%[2]d`

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
ORDER BY queue COLLATE "C", state, bucket`
)
