package postgres

// Bulk create (bulk.go). Written with {S} like sql.go's statements and rendered per schema.
const (
	// sqlBulkStage creates the staging table COPY fills: a temporary table, private to the
	// connection and dropped at the end of the transaction whatever happens (a caller's rollback
	// included). Unlogged by nature, so staging costs no WAL.
	sqlBulkStage = `CREATE TEMP TABLE jobs_bulk_runs (
	id text, job text, queue text, key text, tenant text, no_tenant boolean, enqueued_by text,
	input bytea, state text, attempt integer, ready_at timestamptz, created_at timestamptz,
	trace_parent text, trace_state text, priority integer, ord integer
) ON COMMIT DROP`

	// sqlBulkInsert moves the staged rows into runs in (job, key, tenant) order, as RunCreate
	// inserts them (two creates holding overlapping keys then lock in one order and cannot
	// deadlock). A row whose (job, tenant, key) a live run holds (stored, or an earlier row of
	// the batch) is left out; the ids returned are the runs written.
	sqlBulkInsert = `INSERT INTO {S}.runs (id, job, queue, key, tenant, no_tenant, enqueued_by, input,
	state, attempt, ready_at, last_seq, created_at, updated_at, trace_parent, trace_state, priority)
SELECT id, job, queue, key, tenant, no_tenant, enqueued_by, input, state, attempt, ready_at, 1,
	created_at, created_at, trace_parent, trace_state, priority
FROM pg_temp.jobs_bulk_runs
ORDER BY job, key, tenant, ord
ON CONFLICT (job, tenant, key) WHERE state IN ` + liveStates + ` DO NOTHING
RETURNING id`

	// sqlBulkUnstage drops the staging table at once, so a second bulk create in the same
	// (caller's) transaction can create it again.
	sqlBulkUnstage = `DROP TABLE pg_temp.jobs_bulk_runs`

	// The savepoint the fast path (bulk_copy.go) streams runs under: rolled back when the COPY
	// meets a held key, released once the history is written.
	sqlBulkSavepoint = `SAVEPOINT jobs_bulk`
	sqlBulkRollback  = `ROLLBACK TO SAVEPOINT jobs_bulk`
	sqlBulkRelease   = `RELEASE SAVEPOINT jobs_bulk`

	// sqlBulkCopy streams binary rows (bulk_encode.go) into a table's listed columns.
	sqlBulkCopy = `COPY %s (%s) FROM STDIN BINARY`
)

// bulkRunColumns are the runs columns the fast path's COPY writes; the others take their
// defaults, as a RunCreate insert leaves them.
var bulkRunColumns = []string{"id", "job", "queue", "key", "tenant", "no_tenant", "enqueued_by",
	"input", "state", "attempt", "ready_at", "last_seq", "created_at", "updated_at",
	"trace_parent", "trace_state", "priority"}

// bulkStageColumns are the staging table's columns, in COPY's order.
var bulkStageColumns = []string{"id", "job", "queue", "key", "tenant", "no_tenant", "enqueued_by",
	"input", "state", "attempt", "ready_at", "created_at", "trace_parent", "trace_state", "priority", "ord"}

// historyColumns are the history table's columns COPY writes.
var historyColumns = []string{"run_id", "seq", "kind", "name", "at", "data"}
