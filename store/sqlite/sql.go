package sqlite

// Every SQL statement of the backend lives in this file (the schema lives in migrations/), so a
// reviewer reads the whole of what the backend asks of SQLite in one place and the Go files hold
// only logic. Statements are prepared once per connection (see stmtCache) and found by their
// text, so each constant is also the cache key; the write transactions' statements are listed
// in writeStatements, at the end.
//
// Conventions: times are INTEGER unix nanoseconds (UTC), the zero time being minTime (see
// encTime); lists of strings are JSON arrays expanded with json_each, which keeps every
// statement's text fixed whatever the number of items.

// runCols are the columns of a runs row, in the order scanRun reads them.
const runCols = `id, job, queue, key, tenant, no_tenant, enqueued_by, input, state, attempt, fence,
	worker_id, lease_until, ready_at, last_seq, result, error_code, error, stop_reason,
	created_at, updated_at, finished_at, trace_parent, trace_state, priority`

// The migration ledger.
const (
	sqlLedgerCreate = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`
	sqlLedgerVersions = `SELECT version FROM schema_migrations ORDER BY version`
	sqlLedgerInsert   = `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`
)

// Runs.
const (
	sqlRunGet = `SELECT ` + runCols + ` FROM runs WHERE id = ?`

	// sqlRunGetApply is sqlRunGet for a mutation, with whether the run has timers and waits
	// (a probe of each primary key): a mutation that finishes the run deletes them only when
	// there are some, where two deletes that find nothing cost the writer two statements.
	sqlRunGetApply = `SELECT ` + runCols + `,
		EXISTS (SELECT 1 FROM timers t WHERE t.run_id = runs.id),
		EXISTS (SELECT 1 FROM waits w WHERE w.run_id = runs.id)
		FROM runs WHERE id = ?`

	sqlRunExists = `SELECT 1 FROM runs WHERE id = ?`

	// sqlRunLiveByKey finds the live run holding (job, tenant, key) (store.LiveKey); the state
	// list is the runs_live_key index's predicate, so the index answers it.
	sqlRunLiveByKey = `SELECT ` + runCols + ` FROM runs
		WHERE job = ? AND tenant = ? AND key = ? AND state IN ('ready', 'delayed', 'running', 'suspended')`

	sqlRunInsert = `INSERT INTO runs (` + runCols + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

	// sqlRunSave writes back every column a transition, a wake-up, a cancel or a retry may
	// change; the Go code computes the new row and this statement stores it.
	sqlRunSave = `UPDATE runs SET state = ?, attempt = ?, worker_id = ?, lease_until = ?,
		ready_at = ?, last_seq = ?, result = ?, error_code = ?, error = ?, stop_reason = ?,
		updated_at = ?, finished_at = ?
		WHERE id = ?`

	// sqlRunSaveProgress is sqlRunSave for a row whose state, claim and times did not change
	// (a step of a running run, the usual write): it sets no indexed column, so SQLite updates
	// the row alone and none of the runs indexes.
	sqlRunSaveProgress = `UPDATE runs SET attempt = ?, last_seq = ?, result = ?, error_code = ?,
		error = ?, stop_reason = ?, updated_at = ?
		WHERE id = ?`

	// sqlClaimCandidates walks one queue's ready runs through runs_queue_state, oldest ReadyAt
	// first (the id breaks ties, as in every backend), skipping runs parked for another worker
	// whose sticky window has not passed (:workers, a JSON array, are the claim's workers).
	sqlClaimCandidates = `SELECT id, ready_at, worker_id FROM runs
		WHERE queue = :queue AND state = 'ready'
		  AND (worker_id = '' OR ready_at <= :sticky_before OR worker_id IN (SELECT value FROM json_each(:workers)))
		ORDER BY ready_at, id
		LIMIT :limit`

	// sqlClaimRuns claims the chosen runs (:ids, a JSON array) in one statement: one bind, one
	// step loop and one reset on the writer for the whole claim, not one a run. RETURNING's
	// order is SQLite's, so the Go code puts the rows back in the chosen order. A run ready
	// after :now is leased for :lease from its ready_at (store.ClaimParams.LeaseFor).
	sqlClaimRuns = `UPDATE runs SET state = 'running', fence = fence + 1, worker_id = :worker,
		lease_until = CASE WHEN ready_at > :now AND :lease > 0 THEN ready_at + :lease ELSE :lease_until END,
		updated_at = :now
		WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'ready'
		RETURNING ` + runCols

	// sqlHeartbeat renews every lease still held in one statement; :leases is a JSON array of
	// [run_id, fence] pairs. The rows it returns are the leases renewed.
	sqlHeartbeat = `UPDATE runs SET lease_until = :lease_until
		FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS fence
		      FROM json_each(:leases)) AS l
		WHERE runs.id = l.id AND runs.fence = l.fence AND runs.state = 'running'
		RETURNING runs.id, runs.fence`

	sqlRunStateFence = `SELECT state, fence FROM runs WHERE id = ?`

	// sqlLapsedLeases lists the runs whose lease lapsed, through the partial index runs_lease
	// (state = 'running' is its predicate), oldest lease first.
	sqlLapsedLeases = `SELECT id, queue FROM runs WHERE state = 'running' AND lease_until < ?
		ORDER BY lease_until, id LIMIT ?`

	sqlExpireLease = `UPDATE runs SET state = 'ready', worker_id = '', lease_until = :zero,
		ready_at = :now, updated_at = :now
		WHERE id = :id`

	// sqlRunList filters by the non-empty parameters and pages backwards from :before by id
	// (run ids are UUIDv7, so id order is creation order).
	sqlRunList = `SELECT ` + runCols + ` FROM runs
		WHERE (:queue = '' OR queue = :queue)
		  AND (:state = '' OR state = :state)
		  AND (:job = '' OR job = :job)
		  AND (:tenant = '' OR tenant = :tenant)
		  AND (:before = '' OR id < :before)
		ORDER BY id DESC
		LIMIT :limit`

	sqlQueueStats = `SELECT queue, state, count(*), min(ready_at) FROM runs
		GROUP BY queue, state ORDER BY queue, state`
)

// History.
const (
	sqlHistoryInsert = `INSERT INTO history (run_id, seq, kind, name, at, data)
		VALUES (?, ?, ?, ?, ?, ?)`

	// LIMIT -1 is SQLite's "no limit".
	sqlHistoryRead = `SELECT seq, kind, name, at, data FROM history
		WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`
)

// Timers.
const (
	sqlTimerUpsert = `INSERT INTO timers (run_id, key, due_at, fire_kind, fire_name, fire_at, fire_data)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (run_id, key) DO UPDATE SET due_at = excluded.due_at,
			fire_kind = excluded.fire_kind, fire_name = excluded.fire_name,
			fire_at = excluded.fire_at, fire_data = excluded.fire_data`

	sqlTimersDeleteRun = `DELETE FROM timers WHERE run_id = ?`

	sqlTimerDelete = `DELETE FROM timers WHERE run_id = ? AND key = ?`

	// sqlTimersDue reads due timers, oldest DueAt first (then run and key, so the order is
	// the same in every backend), through timers_due.
	// Each timer comes with what its fire needs of its run (NULLs: the run is gone), so the
	// fire reads no run row of its own.
	// Whether the run has a wait comes too (a probe of the waits primary key), so a fire
	// deletes waits only when there are some.
	sqlTimersDue = `SELECT t.run_id, t.key, t.due_at, t.fire_kind, t.fire_name, t.fire_at, t.fire_data,
		       r.state, r.queue, r.worker_id, r.last_seq,
		       EXISTS (SELECT 1 FROM waits w WHERE w.run_id = t.run_id)
		FROM timers t LEFT JOIN runs r ON r.id = t.run_id
		WHERE t.due_at <= ?
		ORDER BY t.due_at, t.run_id, t.key
		LIMIT ?`

	sqlTimerNext = `SELECT min(due_at) FROM timers`

	// sqlRunWake is wtx.wake's change to the run row (a timer's fire, an event's delivery):
	// the columns a wake-up changes and no others, so the indexes on the rest are left alone.
	sqlRunWake = `UPDATE runs SET state = 'ready', ready_at = :now, updated_at = :now, lease_until = :zero,
		last_seq = :last_seq
		WHERE id = :id`
)

// Waits, events and deliveries.
const (
	sqlWaitUpsert = `INSERT INTO waits (run_id, name, event, match, match_head, lookback_from)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (run_id, name) DO UPDATE SET event = excluded.event, match = excluded.match,
			match_head = excluded.match_head, lookback_from = excluded.lookback_from`

	sqlWaitsDeleteRun = `DELETE FROM waits WHERE run_id = ?`

	// sqlWaitsForEvent selects the suspended runs' waits an event may satisfy: by name, and
	// by the wait's first match pair being among the event's pairs (or '', the wait matching
	// anything), both through waits_event. The rest of the match is checked in Go
	// (history.Matches), which keeps the one definition of matching in one place.
	sqlWaitsForEvent = `SELECT w.run_id, w.name, w.match FROM waits w
		JOIN runs r ON r.id = w.run_id
		WHERE w.event = :event
		  AND w.match_head IN (SELECT value FROM json_each(:fields) UNION ALL SELECT '')
		  AND r.state = 'suspended'
		ORDER BY w.run_id, w.name`

	// sqlLookback lists the events a new wait may take at once from the lookback window,
	// earliest first: named :event, published at or after :from, holding the wait's first
	// match pair, not yet delivered to the run. The rest of the match is checked in Go.
	// Cost: it walks the name's events of the window through events_name and tests the pair
	// on each (json_each), stopping at the first full match. Fine for windows of thousands of
	// events per name; for far more, a table of (name, pair, published_at) rows would turn the
	// walk into an index search, at one row per field per publish.
	sqlLookback = `SELECT e.id, e.payload, e.fields FROM events e
		WHERE e.name = :event AND e.published_at >= :from
		  AND (:head = '' OR EXISTS (SELECT 1 FROM json_each(e.fields) f WHERE f.value = :head))
		  AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.run_id = :run)
		ORDER BY e.published_at, e.rowid`

	// sqlEventInsert keeps the first publish of an id; RowsAffected 0 says the id was stored.
	sqlEventInsert = `INSERT INTO events (id, name, payload, fields, published_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`

	sqlDeliveryInsert = `INSERT INTO deliveries (event_id, run_id) VALUES (?, ?)
		ON CONFLICT (event_id, run_id) DO NOTHING`

	sqlEventPruneDeliveries = `DELETE FROM deliveries
		WHERE event_id IN (SELECT id FROM events WHERE published_at < ?)`

	sqlEventPrune = `DELETE FROM events WHERE published_at < ?`
)

// Slots.
const (
	sqlSlotHolders = `SELECT count(*), coalesce(sum(holder = ?), 0) FROM slots WHERE key = ?`

	sqlSlotUpsert = `INSERT INTO slots (key, holder, until) VALUES (?, ?, ?)
		ON CONFLICT (key, holder) DO UPDATE SET until = excluded.until`

	// sqlSlotsExpire drops a key's lapsed slots.
	sqlSlotsExpire = `DELETE FROM slots WHERE key = ? AND until <= ?`

	sqlSlotRelease = `DELETE FROM slots WHERE key = ? AND holder = ?`
)

// Connection settings, applied by the driver to every new connection (modernc.org/sqlite's
// _pragma DSN parameters). busy_timeout comes first (the driver orders it so) because the
// others may need a lock another process holds.
const (
	// pragmaWAL: readers never block the writer nor the writer the readers, and a commit
	// appends to the log instead of rewriting pages. The mode is stored in the file.
	pragmaWAL = "journal_mode(WAL)"
	// pragmaForeignKeys: history, timers and waits rows must name an existing run.
	pragmaForeignKeys = "foreign_keys(1)"
	// pragmaQueryOnly: the read pool can never write, so all writes go through the one
	// write connection and never fight over the lock.
	pragmaQueryOnly = "query_only(1)"
)

// pragmaBusyTimeout and pragmaSynchronous take the Config's values.
const (
	pragmaBusyTimeout = "busy_timeout(%d)"
	pragmaSynchronous = "synchronous(%s)"
)

// writeStatements are the statements write transactions run, prepared when the store opens.
var writeStatements = []string{
	sqlRunGet, sqlRunGetApply, sqlRunLiveByKey, sqlRunInsert, sqlRunSave, sqlRunSaveProgress, sqlRunStateFence,
	sqlClaimCandidates, sqlClaimRuns, sqlHeartbeat, sqlLapsedLeases, sqlExpireLease,
	sqlHistoryInsert,
	sqlTimerUpsert, sqlTimersDeleteRun, sqlTimerDelete, sqlTimersDue, sqlRunWake,
	sqlWaitUpsert, sqlWaitsDeleteRun, sqlWaitsForEvent, sqlLookback,
	sqlEventInsert, sqlDeliveryInsert, sqlEventPruneDeliveries, sqlEventPrune,
	sqlSlotHolders, sqlSlotUpsert, sqlSlotsExpire, sqlSlotRelease,
	sqlWorkerReleaseClaims, sqlWorkerReleaseSticky,
	sqlLeaderAcquire, sqlLeaderGet, sqlLeaderRelease, sqlScheduleInsert, sqlScheduleGet, sqlScheduleSave,
	sqlBackfillGet, sqlBackfillInsert, sqlBackfillAdopt, sqlBackfillUpdate, sqlBackfillFinish,
	sqlDedupeGet, sqlDedupeInsert, sqlDedupePrune,
	sqlLaneFirst, sqlLaneNext, sqlLaneHead,
}
