package postgres

// sqlWorkerRelease is WorkerRelease (workers.go) in one statement: a gone worker's running runs
// are handed back as a lapsed lease is, its sticky reservations on suspended and ready runs end,
// and every run that became claimable is notified to its queue's pollers. Its ready and
// suspended runs are found through runs_worker, which holds no running run (015_claim_entries:
// a claim writes no entry there), and its running runs through runs_lease, which holds only
// running runs, the fleet's slots' worth. The candidates are gathered into an array first so
// that the rows are then read by primary key, locked in id order, and checked again under the
// lock; rows another transaction holds are waited for, not skipped, so nothing the worker held
// is left behind.
const sqlWorkerRelease = `
WITH held AS (
	SELECT id, state FROM {S}.runs
	WHERE id = ANY (ARRAY(
		SELECT id FROM {S}.runs WHERE worker_id = $1 AND worker_id <> '' AND state IN ('ready', 'suspended')
		UNION ALL
		SELECT id FROM {S}.runs WHERE state = 'running' AND worker_id = $1))
		AND worker_id = $1 AND state IN ('running', 'ready', 'suspended')
	ORDER BY id
	FOR UPDATE
),
released AS (
	UPDATE {S}.runs r SET
		state = CASE WHEN held.state = 'running' THEN 'ready' ELSE r.state END,
		lease_until = CASE WHEN held.state = 'running' THEN NULL ELSE r.lease_until END,
		ready_at = CASE WHEN held.state = 'running' THEN $2 ELSE r.ready_at END,
		updated_at = CASE WHEN held.state = 'running' THEN $2 ELSE r.updated_at END,
		worker_id = ''
	FROM held WHERE r.id = held.id AND r.worker_id = $1
	RETURNING r.id, r.queue, r.state, held.state = 'running' AS reclaimed
)
SELECT w.id, w.queue, w.reclaimed FROM released w, LATERAL (SELECT pg_notify($3, w.queue)) n
WHERE w.state = 'ready'
ORDER BY w.id`
