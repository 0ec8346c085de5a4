package postgres

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// Every statement of the backend, by name. The Go files hold the logic and refer to statements
// only through these names; the schema's DDL lives in migrations/.
//
// Each statement is written once with {S} for the schema; Open renders the whole set for its
// schema (quoted), so the text is fixed per Store and pgx's per-connection statement cache
// prepares each statement once and from then on sends only Bind/Execute. Statements that take a
// variable number of rows take arrays and unnest them, for the same reason: one text, any batch
// size, one statement per batch rather than one per row.
//
// {RUN} and {RUN_R} expand to the run columns in the order scanRun reads them (unqualified and
// qualified with the alias r).
type stmt int

const (
	stmtBegin stmt = iota
	stmtCommit
	stmtRollback
	stmtLock
	stmtRunInsert
	stmtRunsLive
	stmtHistoryAppend
	stmtTimersArm
	stmtNotify
	stmtRunClaim
	stmtRunClaimShared
	stmtRunsLock
	stmtRunLock
	stmtLookback
	stmtLookbackAny
	stmtRunsUpdate
	stmtWaitRegister
	stmtDeliveriesAdd
	stmtHeartbeat
	stmtHeartbeatOne
	stmtRunGet
	stmtRunList
	stmtRunCancel
	stmtRunRetry
	stmtTimersClear
	stmtWaitsClear
	stmtRunsExpire
	stmtHistoryHead
	stmtHistoryRead
	stmtTimersDueRuns
	stmtTimersDueOf
	stmtTimersDropDue
	stmtRunsWake
	stmtTimerNext
	stmtEventInsert
	stmtWaitsCandidates
	stmtWaitsOf
	stmtEventPrune
	stmtQueueStats
	stmtSlotSweep
	stmtSlotAcquire
	stmtSlotRelease
	stmtListenReady
	stmtListenTimer
	stmtMigrateSchema
	stmtMigrateLedger
	stmtMigrateApplied
	stmtMigrateRecord
	stmtStepsApply
	numStmts
)

// liveStates is the predicate of the idempotency index; a statement that relies on the index
// (ON CONFLICT) must repeat it exactly.
const liveStates = `('ready', 'delayed', 'running', 'suspended')`

const runColumns = `id, job, queue, key, tenant, no_tenant, enqueued_by, input, state, attempt, fence,
	worker_id, lease_until, ready_at, last_seq, result, error_code, error, stop_reason, created_at,
	updated_at, finished_at, trace_parent, trace_state, priority`

// sqlRunClaimPick is the oldest-first claim up to its picked CTE (stmtRunClaim says how).
const sqlRunClaimPick = `
WITH picked AS (
	SELECT c.id AS key, c.holder, row_number() OVER (ORDER BY c.ready_at, c.id) AS ord
	FROM unnest($1::text[]) AS q(name)
	CROSS JOIN LATERAL (
		SELECT r.id, r.ready_at, CASE WHEN r.ready_at > $3 THEN r.worker_id ELSE '' END AS holder
		FROM {S}.runs r
		WHERE r.state = 'ready' AND r.queue = q.name
			AND (r.worker_id = '' OR r.ready_at <= $3 OR r.worker_id = ANY ($2::text[]))
		ORDER BY r.ready_at, r.id
		LIMIT $4
		FOR UPDATE SKIP LOCKED
	) c
	ORDER BY c.ready_at, c.id
	LIMIT $4
)`

var sqlText = [numStmts]string{
	stmtBegin:    `BEGIN`,
	stmtCommit:   `COMMIT`,
	stmtRollback: `ROLLBACK`,

	// A transaction-scoped advisory lock on a key computed in Go (lockKey), so a transaction that
	// takes several can take them in ascending order, and two such transactions never deadlock.
	stmtLock: `SELECT pg_advisory_xact_lock($1)`,

	// RunCreate. Rows are inserted in (job, key, tenant) order, so two creates holding
	// overlapping keys wait on each other in the same order and cannot deadlock; for one key
	// named twice in a call for one tenant, the first (ord) is inserted and the second conflicts
	// with it. A live run holds (job, tenant, key) (store.LiveKey, runs_live_key since
	// 021_incompatible_tenant_key), so the same (job, key) for two tenants is two runs.
	stmtRunInsert: `
INSERT INTO {S}.runs (id, job, queue, key, tenant, no_tenant, enqueued_by, input, state, attempt,
	ready_at, last_seq, created_at, updated_at, trace_parent, trace_state, priority)
SELECT u.id, u.job, u.queue, u.key, u.tenant, u.no_tenant, u.enqueued_by, u.input, u.state,
	u.attempt, u.ready_at, 1, u.created_at, u.created_at, u.trace_parent, u.trace_state, u.priority
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::boolean[], $7::text[],
	$8::bytea[], $9::text[], $10::integer[], $11::timestamptz[], $12::timestamptz[], $13::text[],
	$14::text[], $15::integer[])
	WITH ORDINALITY AS u(id, job, queue, key, tenant, no_tenant, enqueued_by, input, state, attempt,
	ready_at, created_at, trace_parent, trace_state, priority, ord)
ORDER BY u.job, u.key, u.tenant, u.ord
ON CONFLICT (job, tenant, key) WHERE state IN ` + liveStates + ` DO NOTHING
RETURNING id`,

	// The live run holding each (job, tenant, key): read after the insert, in a new snapshot, so it sees
	// the row a concurrent create committed while our insert waited on it. One probe of
	// runs_live_key a pair: the lateral subquery's LIMIT 1 (a pair has at most one live run,
	// the index is unique) keeps it from being flattened into a join the planner may do another
	// way. The join form, (job, key) IN (unnest …), planned from statistics taken when nearly
	// every run had finished (few live rows), became a scan of the whole live index hashed
	// against the pairs, which reads every ready run of a backlog on every create: 240–310 µs a
	// created job in the no-op benchmark, its largest statement (bench/ANALYSIS.md, "Postgres
	// per statement").
	stmtRunsLive: `
SELECT {RUN_R} FROM unnest($1::text[], $2::text[], $3::text[]) AS p(j, t, k)
CROSS JOIN LATERAL (
	SELECT * FROM {S}.runs l
	WHERE l.key = p.k AND l.job = p.j AND l.tenant = p.t AND l.state IN ` + liveStates + `
	LIMIT 1) r`,

	stmtHistoryAppend: `
INSERT INTO {S}.history (run_id, seq, kind, name, at, data)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::timestamptz[], $6::bytea[])`,

	// Timer keys are unique per run: arming a key again moves it.
	stmtTimersArm: `
INSERT INTO {S}.timers (run_id, key, due_at, fire_kind, fire_name, fire_at, fire_data)
SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::text[],
	$6::timestamptz[], $7::bytea[])
ON CONFLICT (run_id, key) DO UPDATE SET due_at = excluded.due_at, fire_kind = excluded.fire_kind,
	fire_name = excluded.fire_name, fire_at = excluded.fire_at, fire_data = excluded.fire_data`,

	// Notifications are sent at commit, and only if it commits; Postgres folds identical ones
	// within a transaction.
	stmtNotify: `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`,

	// RunClaim, in one statement. Each queue is read on its own through runs_ready (built
	// when an engine that claims oldest-first starts, oldest.go; without it the statement is
	// right and sorts the queue's ready runs), in (ready_at, id) order, under SKIP LOCKED
	// (concurrent claimers pass over each other's rows instead of queueing on them); the
	// queues' picks are merged and cut to the limit, and the fences bumped. A single scan over
	// queue = ANY(...) cannot walk the index in order and would sort every ready run of the
	// queues on each claim. The cost of reading queues apart: with several queues, up to limit
	// rows per queue are locked and the surplus is left to other claimers only when this
	// statement commits, a moment later. $2 is the claim's workers: one, stamped on every run, or
	// in the shared form the shares', $7 their limits (claimShared). Sent after sqlClaimCommit, in
	// one pipeline (epoch.go).
	stmtRunClaim: sqlRunClaimPick + `
UPDATE {S}.runs r SET state = 'running', fence = {FENCE}, worker_id = ($2::text[])[1], lease_until = {LEASE},
	updated_at = $6
FROM picked WHERE r.id = picked.key
RETURNING {RUN_R}`,
	stmtRunClaimShared: claimShared(sqlRunClaimPick, "$7", "id"),

	// Every multi-run lock takes its rows in id order, so two of them never deadlock.
	// stmtRunsLock reaches each run by primary key, one id at a time (a subquery that carries
	// FOR UPDATE is not merged into the join), for the reason TimerFire's first statement does:
	// as id = ANY($1), the generic plan a connection caches while runs is nearly empty is a
	// sequential scan of runs, kept until an ANALYZE, so every record read every run.
	stmtRunsLock: `
SELECT {RUN_R} FROM (SELECT DISTINCT id FROM unnest($1::text[]) AS u(id) ORDER BY id) t
CROSS JOIN LATERAL (SELECT * FROM {S}.runs WHERE id = t.id FOR UPDATE) r
ORDER BY t.id`,
	stmtRunLock: `SELECT {RUN} FROM {S}.runs WHERE id = $1 FOR UPDATE`,

	// The lookback check of a wait: the earliest events named $1 published at or after $2 whose
	// fields include the match and that this run has not received. $5 is how many candidates
	// the batch may need (one per wait of this run in the batch). The candidates are gathered
	// before they are ordered so that the planner weighs the whole window: asked for the first
	// row in order, it walks events_lookback through every event of the name in the window
	// rather than use events_fields to find the few that match.
	stmtLookback: `
WITH matching AS MATERIALIZED (
	SELECT e.id, e.payload, e.published_at, e.pos FROM {S}.events e
	WHERE e.name = $1 AND e.published_at >= $2 AND e.fields @> $3::text[]
)
SELECT m.id, m.payload FROM matching m
WHERE NOT EXISTS (SELECT 1 FROM {S}.deliveries d WHERE d.run_id = $4 AND d.event_id = m.id)
ORDER BY m.published_at, m.pos
LIMIT $5`,

	// The lookback check of a wait with an empty match: every event of the name in the window
	// matches, so the earliest not yet delivered is found walking events_lookback in order.
	stmtLookbackAny: `
SELECT e.id, e.payload FROM {S}.events e
WHERE e.name = $1 AND e.published_at >= $2
	AND NOT EXISTS (SELECT 1 FROM {S}.deliveries d WHERE d.run_id = $3 AND d.event_id = e.id)
ORDER BY e.published_at, e.pos
LIMIT $4`,

	// RunApply's one run write per batch: each run's new row, computed in Go. result is sent
	// only when a mutation set it (NULL keeps the stored one), so a completed step does not send
	// the run's result back to the server.
	stmtRunsUpdate: `
UPDATE {S}.runs r SET state = u.state, attempt = u.attempt, worker_id = u.worker_id,
	lease_until = u.lease_until, ready_at = u.ready_at, last_seq = u.last_seq,
	result = COALESCE(u.result, r.result), error_code = u.error_code, error = u.error,
	stop_reason = u.stop_reason, updated_at = u.updated_at, finished_at = u.finished_at
FROM unnest($1::text[], $2::text[], $3::integer[], $4::text[], $5::timestamptz[],
	$6::timestamptz[], $7::bigint[], $8::bytea[], $9::text[], $10::text[], $11::text[],
	$12::timestamptz[], $13::timestamptz[])
	AS u(id, state, attempt, worker_id, lease_until, ready_at, last_seq, result, error_code, error,
	stop_reason, updated_at, finished_at)
WHERE r.id = u.id`,

	// RunApply's fast path, for a batch whose mutations only append events and at most complete
	// their run (the shape of nearly every batch: steps): the fence check, the run update and
	// the history insert in ONE statement, so the batch costs one round trip and no BEGIN or
	// COMMIT. Mutations whose run is not running under their fence are left out of the result;
	// RunApply asks why afterwards. The update returns the run's seq before the batch, so that
	// the history insert does not join the parameters again.
	//
	// The fence check is the UPDATE's own condition, with no lock step before it: when a row
	// was changed by a transaction that committed meanwhile (a heartbeat, a cancel, a claim after
	// the lease lapsed), the UPDATE waits for it and checks the condition again against the
	// row's newest version, so a stale mutation is refused as a locked read would refuse it. A
	// SELECT … FOR UPDATE before the update cost each row a second visit and a lock record in
	// the WAL (docs/architecture.md, "A step batch without its lock step"). The UPDATE locks its
	// rows in the order its plan meets them, which is not always id order: a plan driven by the
	// batch follows the batch (applySteps sends it in id order), but a custom plan of a small
	// batch may scan runs_lease and hash the batch. Two step batches never share a run (a run has
	// one record in flight); the heartbeat, which shares them all the time, never waits for a row
	// while it holds another (stmtHeartbeat). Should another multi-run lock close a cycle with a
	// batch, Postgres ends one of the two and the engine settles the batch run by run.
	// $1 ids, $2 fences, $3 event counts, $4 new state ('' stays running), $5 result, $6 now,
	// $13 the seq the mutation follows (0: unchecked); $7..$12 the events: run id, ordinal from 1
	// within the run's mutation, kind, name, at, data.
	stmtStepsApply: `
WITH m AS (
	SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::bytea[],
		$6::timestamptz[], $13::bigint[]) AS m(id, fence, n, state, result, now, after_seq)
),
upd AS (
	UPDATE {S}.runs r SET last_seq = r.last_seq + k.n,
		state = CASE WHEN k.state = '' THEN r.state ELSE k.state END,
		result = COALESCE(k.result, r.result),
		worker_id = CASE WHEN k.state = '' THEN r.worker_id ELSE '' END,
		lease_until = CASE WHEN k.state = '' THEN r.lease_until ELSE NULL END,
		updated_at = k.now,
		finished_at = CASE WHEN k.state = 'completed' THEN k.now ELSE r.finished_at END
	FROM m k
	WHERE r.id = k.id AND r.fence = k.fence AND r.state = 'running'
		AND (k.after_seq = 0 OR r.last_seq = k.after_seq)
	RETURNING {RUN_R}, r.last_seq - k.n AS base_seq
),
ins AS (
	INSERT INTO {S}.history (run_id, seq, kind, name, at, data)
	SELECT e.run_id, u.base_seq + e.ord, e.kind, e.name, e.at, e.data
	FROM unnest($7::text[], $8::bigint[], $9::text[], $10::text[], $11::timestamptz[], $12::bytea[])
		AS e(run_id, ord, kind, name, at, data)
	JOIN upd u ON u.id = e.run_id
)
SELECT {RUN} FROM upd`,

	// One row per wait: match is itself an array, which unnest would flatten.
	stmtWaitRegister: `
INSERT INTO {S}.waits (run_id, name, event, match, match_head, lookback_from)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (run_id, name) DO UPDATE SET event = excluded.event, match = excluded.match,
	match_head = excluded.match_head, lookback_from = excluded.lookback_from`,

	stmtDeliveriesAdd: `
INSERT INTO {S}.deliveries (run_id, event_id)
SELECT * FROM unnest($1::text[], $2::text[])
ON CONFLICT DO NOTHING`,

	// RunHeartbeat's first pass, in one statement: the leased runs that no other transaction
	// holds are locked in id order and their fresh state read under the lock; the ones still held
	// are extended; every lease gets its run's state back so Go can say why one was refused, or
	// skipped when its row is locked (a step batch is writing it). It never waits for a row, so
	// it cannot deadlock with a transaction that holds some of its runs and waits for others: the
	// step batch takes its rows in whatever order its plan meets them (stmtStepsApply).
	stmtHeartbeat: heartbeatSQL("SKIP LOCKED"),

	// RunHeartbeat's last pass, one lease still held by another transaction at a time: a
	// statement that holds no other row may wait for one without risk of a deadlock.
	stmtHeartbeatOne: heartbeatSQL(""),

	stmtRunGet: `SELECT {RUN} FROM {S}.runs WHERE id = $1`,

	// Newest first. Run ids are time-ordered (UUIDv7), so id order is creation order, and
	// Before pages with a plain id comparison that the primary key serves.
	stmtRunList: `
SELECT {RUN} FROM {S}.runs
WHERE ($1 = '' OR queue = $1) AND ($2 = '' OR state = $2) AND ($3 = '' OR job = $3)
	AND ($4 = '' OR tenant = $4) AND ($5 = '' OR id < $5)
ORDER BY id DESC
LIMIT $6`,

	stmtRunCancel: `
UPDATE {S}.runs SET state = 'cancelled', worker_id = '', lease_until = NULL, last_seq = $2,
	updated_at = $3, finished_at = $3
WHERE id = $1`,

	stmtRunRetry: `
UPDATE {S}.runs SET state = 'ready', attempt = $4, worker_id = '', lease_until = NULL, ready_at = $2,
	last_seq = $3, error_code = '', error = '', stop_reason = '', updated_at = $2, finished_at = NULL
WHERE id = $1`,

	stmtTimersClear: `DELETE FROM {S}.timers WHERE run_id = ANY($1::text[])`,
	stmtWaitsClear:  `DELETE FROM {S}.waits WHERE run_id = ANY($1::text[])`,

	// RunExpireLeases, in one statement, with the wake-up notification per run (folded by
	// Postgres to one per queue).
	stmtRunsExpire: `
WITH lapsed AS (
	SELECT id FROM {S}.runs
	WHERE state = 'running' AND lease_until < $1
	ORDER BY lease_until
	LIMIT $2
	FOR UPDATE SKIP LOCKED
),
woken AS (
	UPDATE {S}.runs r SET state = 'ready', worker_id = '', lease_until = NULL, ready_at = $1,
		updated_at = $1
	FROM lapsed WHERE r.id = lapsed.id
	RETURNING r.id, r.queue
)
SELECT w.id, w.queue FROM woken w, LATERAL (SELECT pg_notify($3, w.queue)) n`,

	// The run's last seq, read with its history: HistoryRead tells an unknown run (no row) from
	// one with nothing after afterSeq ($2), and sizes its result. It also reads the fields the
	// run's first and last events are rebuilt from when history holds no row for them
	// (implied.go): the input from seq 1 on, the result of a completed run not yet read to its end.
	stmtHistoryHead: `
SELECT last_seq, job, queue, key, tenant, no_tenant, enqueued_by, created_at,
	CASE WHEN $2::bigint < 1 THEN input END, state,
	CASE WHEN state = 'completed' AND last_seq > $2::bigint THEN result END, finished_at
FROM {S}.runs WHERE id = $1`,

	stmtHistoryRead: `
SELECT seq, kind, name, at, data FROM {S}.history
WHERE run_id = $1 AND seq > $2
ORDER BY seq
LIMIT $3`,

	// TimerFire, step 1: lock the runs of the earliest due timers, passing over runs another
	// transaction holds (another timer service firing them, a worker's write in flight). Each run
	// is locked in a subquery of its own, which Postgres does not merge into the join (it carries
	// FOR UPDATE), so the runs can only be reached one id at a time, by primary key, in id order
	// (the due ids sorted first). The plan must not depend on what the planner knows of runs: a
	// connection caches this statement's generic plan on its first fires, which on a fresh
	// database come while runs is nearly empty and has no statistics, and keeps it until an
	// ANALYZE. As id = ANY(ARRAY(…)) that plan was a sequential scan of runs, which on 10,000
	// suspended runs took 0.2–0.4 s a round until autovacuum's first ANALYZE replaced it; as
	// id IN (…), a generic plan may hash-join a scan of every run, a million suspended ones
	// included.
	stmtTimersDueRuns: `
SELECT {RUN_R} FROM (
	SELECT DISTINCT run_id FROM (
		SELECT run_id FROM {S}.timers WHERE due_at <= $1 ORDER BY due_at LIMIT $2) d
	ORDER BY run_id) t
CROSS JOIN LATERAL (SELECT * FROM {S}.runs WHERE id = t.run_id FOR UPDATE SKIP LOCKED) r
ORDER BY t.run_id`,

	// TimerFire, step 2: the due timers of the runs we locked, read in a snapshot taken after the
	// locks, so they are exactly what the last holder of each run left.
	stmtTimersDueOf: `
SELECT run_id, key, due_at, fire_kind, fire_name, fire_at, fire_data FROM {S}.timers
WHERE run_id = ANY($1::text[]) AND due_at <= $2
ORDER BY due_at, run_id, key`,

	stmtTimersDropDue: `DELETE FROM {S}.timers WHERE run_id = ANY($1::text[]) AND due_at <= $2`,

	// A wake-up (timer fired, event delivered): ready now, lease gone, worker_id kept so the
	// sticky worker gets first call.
	stmtRunsWake: `
UPDATE {S}.runs r SET state = 'ready', lease_until = NULL, ready_at = $3, last_seq = u.last_seq,
	updated_at = $3
FROM unnest($1::text[], $2::bigint[]) AS u(id, last_seq)
WHERE r.id = u.id`,

	stmtTimerNext: `SELECT min(due_at) FROM {S}.timers`,

	stmtEventInsert: `
INSERT INTO {S}.events (id, name, payload, fields, published_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO NOTHING
RETURNING id`,

	stmtWaitsCandidates: `
SELECT run_id, name, match FROM {S}.waits
WHERE event = $1 AND (match_head = '' OR match_head = ANY($2::text[]))`,

	stmtWaitsOf: `
SELECT run_id, name, match FROM {S}.waits
WHERE run_id = ANY($1::text[]) AND event = $2
ORDER BY run_id, name`,

	stmtEventPrune: `
WITH pruned AS (DELETE FROM {S}.events WHERE published_at < $1 RETURNING id),
forgotten AS (DELETE FROM {S}.deliveries WHERE event_id IN (SELECT id FROM pruned))
SELECT count(*) FROM pruned`,

	stmtQueueStats: `
SELECT queue, state, count(*), min(ready_at) FILTER (WHERE state = 'ready')
FROM {S}.runs
GROUP BY queue, state
ORDER BY queue COLLATE "C", state`,

	// Slots: under the key's advisory lock, sweep the lapsed slots, then take or renew ours if
	// we still hold one or fewer than the limit of others do.
	stmtSlotSweep: `DELETE FROM {S}.slots WHERE key = $1 AND until <= $2`,
	stmtSlotAcquire: `
WITH held AS (
	SELECT count(*) FILTER (WHERE holder <> $2) AS others, COALESCE(bool_or(holder = $2), false) AS mine
	FROM {S}.slots WHERE key = $1 AND until > $3
),
taken AS (
	INSERT INTO {S}.slots (key, holder, until)
	SELECT $1, $2, $4 FROM held WHERE held.mine OR held.others < $5
	ON CONFLICT (key, holder) DO UPDATE SET until = excluded.until
	RETURNING 1
)
SELECT count(*) > 0 FROM taken`,
	stmtSlotRelease: `DELETE FROM {S}.slots WHERE key = $1 AND holder = $2`,

	stmtListenReady: `LISTEN {CH_READY}`,
	stmtListenTimer: `LISTEN {CH_TIMER}`,

	// Migrate. The ledger's applied_at is the database's clock on purpose: it is an audit note
	// for operators, not an input to any decision.
	stmtMigrateSchema: `CREATE SCHEMA IF NOT EXISTS {S}`,
	stmtMigrateLedger: `
CREATE TABLE IF NOT EXISTS {S}.schema_migrations (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`,
	stmtMigrateApplied: `SELECT version FROM {S}.schema_migrations`,
	stmtMigrateRecord:  `INSERT INTO {S}.schema_migrations (version, name) VALUES ($1, $2)`,
}

// statements is the statement set rendered for one schema.
type statements [numStmts]string

func newStatements(schema string) *statements {
	r := schemaReplacer(schema)
	var s statements
	for i, text := range sqlText {
		s[i] = r.Replace(text)
	}
	return &s
}

// schemaReplacer renders {S}, {RUN}, {RUN_R}, the channel names {CH_READY} and {CH_TIMER}, the
// name of the session's fence epoch {EPOCH}, a claim's new fence {FENCE} and its lease {LEASE}
// for schema. Names are quoted as identifiers, so they can never be read as SQL.
func schemaReplacer(schema string) *strings.Replacer {
	qualified := "r." + strings.Join(strings.Fields(runColumns), " r.")
	// epochSetting(schema) is an identifier with a dot: no quote to escape.
	epoch := "'" + epochSetting(schema) + "'"
	sch := pgx.Identifier{schema}.Sanitize()
	return strings.NewReplacer(
		"{FENCE}", strings.NewReplacer("{EPOCH}", epoch, "{S}", sch).Replace(fenceExpr),
		"{LEASE}", leaseExpr,
		"{EPOCH}", epoch,
		"{S}", sch,
		"{CH_READY}", pgx.Identifier{schema + "_ready"}.Sanitize(),
		"{CH_TIMER}", pgx.Identifier{schema + "_timer"}.Sanitize(),
		"{RUN_R}", qualified,
		"{RUN}", runColumns,
	)
}

// heartbeatSQL is RunHeartbeat's statement, its lock step waiting for a row or passing over it
// (wait "SKIP LOCKED"). Each lease's answer: its ordinal, its run's state, whether it was
// extended, and whether it was passed over (its row exists and was not locked).
func heartbeatSQL(wait string) string {
	return `
WITH l AS (SELECT * FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS l(id, fence, ord)),
locked AS (
	SELECT r.id, r.state, r.fence FROM {S}.runs r
	WHERE r.id IN (SELECT id FROM l) ORDER BY r.id FOR UPDATE ` + wait + `
),
extended AS (
	UPDATE {S}.runs r SET lease_until = $3
	FROM locked k
	WHERE r.id = k.id AND k.state = 'running'
		AND k.fence IN (SELECT l.fence FROM l WHERE l.id = k.id)
	RETURNING r.id, r.fence
)
SELECT l.ord, COALESCE(k.state, ''),
	EXISTS (SELECT 1 FROM extended x WHERE x.id = l.id AND x.fence = l.fence),
	k.id IS NULL AND EXISTS (SELECT 1 FROM {S}.runs r WHERE r.id = l.id)
FROM l LEFT JOIN locked k ON k.id = l.id`
}

// leaseExpr is the lease a claim ($5 lease until, $6 now) gives the run r: $5, or as long from
// r's ready_at when the run became ready after $6 (store.ClaimParams.LeaseFor).
const leaseExpr = `CASE WHEN r.ready_at > $6 AND $5::timestamptz > $6::timestamptz
	THEN r.ready_at + ($5::timestamptz - $6::timestamptz) ELSE $5 END`

// fenceExpr is a claim's new fence for the run r: one more than its last, and at least the
// connection's fence epoch in the high 32 bits, or, on a session without one, the stored epoch
// plus one (epoch.go says why). COALESCE evaluates the subquery only when it is needed.
const fenceExpr = `GREATEST(r.fence + 1, COALESCE(NULLIF(current_setting({EPOCH}, true), '')::bigint,
	(SELECT e.epoch + 1 FROM {S}.fence_epoch e)) << 32)`
