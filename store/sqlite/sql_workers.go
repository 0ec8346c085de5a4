package sqlite

// Statements of WorkerRelease (workers.go). The runs_worker partial index (migration
// 002_workers) keeps both to the worker's own rows.
const (
	// sqlWorkerReleaseClaims hands a gone worker's running runs back, as a lapsed lease does.
	sqlWorkerReleaseClaims = `UPDATE runs SET state = 'ready', worker_id = '', lease_until = :zero,
		ready_at = :now, updated_at = :now
		WHERE worker_id = :worker AND state = 'running'
		RETURNING id, queue`

	// sqlWorkerReleaseSticky ends a gone worker's sticky reservations; the woken (ready) ones
	// are returned so their queues' pollers can be woken.
	sqlWorkerReleaseSticky = `UPDATE runs SET worker_id = ''
		WHERE worker_id = :worker AND state IN ('ready', 'suspended')
		RETURNING id, queue, state`
)
