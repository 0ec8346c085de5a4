package postgres

import "strings"

// sqlClaimFairSettings is the fair claim's transaction's settings (flow.go says why) and how it
// commits (sqlClaimCommit, epoch.go).
const sqlClaimFairSettings = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
	set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
	set_config('jit', 'off', true), ` + sqlClaimCommit

// sqlClaimSharesTemplate splits a claim's candidates among its shares (store/share.go, the same rule as
// store.ClaimParams.ShareOut): picked holds each candidate's key, its claim-order place ord and
// its holder (the worker it is held for while its sticky window lasts, empty for none); $2 are the
// shares' workers and {LIMITS} their limits, in order. held gives each held candidate to its holder's
// share while the share has room; rooms is what each share has left; free fills those rooms in
// share order with the other candidates, in claim order. The CTEs read only the candidates (at
// most the claim's limit) and the shares, so their plan does not matter.
const sqlClaimSharesTemplate = `
shares AS (
	SELECT s.worker, s.lim, s.k FROM unnest($2::text[], {LIMITS}::integer[]) WITH ORDINALITY AS s(worker, lim, k)
),
held AS (
	SELECT h.key, h.holder AS worker FROM (
		SELECT p.key, p.holder, row_number() OVER (PARTITION BY p.holder ORDER BY p.ord) AS n
		FROM picked p WHERE p.holder <> ''
	) h JOIN shares s ON s.worker = h.holder
	WHERE h.n <= s.lim
),
rooms AS (
	SELECT b.worker, b.hi - b.room AS lo, b.hi FROM (
		SELECT r.worker, r.room, sum(r.room) OVER (ORDER BY r.k) AS hi FROM (
			SELECT s.worker, s.k, s.lim - (SELECT count(*) FROM held h WHERE h.worker = s.worker) AS room
			FROM shares s
		) r
	) b
),
assigned AS (
	SELECT key, worker FROM held
	UNION ALL
	SELECT f.key, r.worker FROM (
		SELECT p.key, row_number() OVER (ORDER BY p.ord) AS n FROM picked p WHERE p.holder = ''
	) f JOIN rooms r ON f.n > r.lo AND f.n <= r.hi
)`

// claimShared makes a claim statement's shared form (store/share.go) from the statement up to its
// picked CTE (pick), the limits' parameter and its UPDATE's row set and key ("ctid" or "id"): a
// claim for one worker is sent in the plain form, which stamps $2's one worker on every run and
// pays nothing for the split.
func claimShared(pick, limits, key string) string {
	return pick + ",\n" + strings.ReplaceAll(sqlClaimSharesTemplate, "{LIMITS}", limits) + `
UPDATE {S}.runs r SET state = 'running', fence = {FENCE},
	worker_id = (SELECT a.worker FROM assigned a WHERE a.key = r.` + key + `), lease_until = {LEASE}, updated_at = $6
WHERE r.` + key + ` = ANY (ARRAY(SELECT key FROM assigned))
RETURNING {RUN_R}`
}

// The fair claim (flow.go), in one statement. $1 queues, $2 the claim's workers (one, or the
// shares'), $3 sticky-before, $4 limit (the shares' total), $5 lease until, $6 now, $7 each
// queue's rotation cursor, $8 whether it has one; in the shared form (sqlClaimFairShared), $9 the
// shares' limits.
//
// walk finds each queue's lanes in rotation order through runs_lanes, one index probe a lane (a
// loose index scan: Postgres has no skip scan of its own): the tenants after the cursor, then,
// wrapped around, those from the first up to it; at most $4 of each. Each probe has a bound the
// index can seek to and orders by the index's own columns, so it reads one entry; the wrapped
// walk stops past the cursor rather than filtering (a filter would read a whole lane to reject).
// Each probe keeps the entry it found, the lane's first ready run (at, id). kept keeps the first
// $4 lanes of each queue, each with its share, ceil($4/lanes). heads reads each kept lane's first
// claimable runs in claim order under SKIP LOCKED, like the plain claim, at most its share,
// starting at the walk's entry: a seek, where starting at the lane's beginning would step again
// over every index entry the walk stepped over (while a backlog drains, its lane's beginning is
// thousands of entries of runs already claimed, dead until vacuum, and the walk has just read past
// them). more tops the claim up when heads found fewer than $4 runs (rule 3): each lane that gave
// its whole share gives up to the shortfall more, seeking past its last head, ranked on from it;
// when heads found enough, its one-time filter (got, the heads' count) skips it. picked ranks them
// within their lane and keeps the first $4 by (rank, the lane's place, claim time, id). The cost
// grows with the limit, not with the backlog nor the number of tenants; the surplus heads locked
// here are left to other claimers when the statement commits.
//
// The statement runs under a generic plan (flow.go); the UPDATE takes its rows through
// ctid = ANY (ARRAY(…)) because a join to picked, planned without $4's value, is a hash join over
// the whole table. It takes them by the tuple ids heads locked (a Tid Scan: one heap page a run),
// not by id through runs_pkey, which would descend the key index again for each run heads has
// just read and locked (three or four buffers and a text comparison at each level). A row that
// another transaction updated between the statement's snapshot and heads' lock, keeping it
// claimable (WorkerRelease ending a sticky reservation), is locked in its new version, which the
// snapshot cannot see: the UPDATE finds no row at that ctid, and the run stays ready for the next
// claim (a claim may return fewer runs than its limit; the release has notified its queue). By
// id, the UPDATE would have followed the update to the new version and claimed it. Each run's
// worker is its share's in the shared form (claimShared), looked up by its tuple id among the few assigned.
const sqlClaimFairPick = `
WITH RECURSIVE params AS (
	SELECT * FROM unnest($1::text[], $7::text[], $8::boolean[]) AS p(queue, cursor, has)
),
walk AS (
	SELECT p.queue, p.cursor, false AS wrapped, 1 AS n, f.tenant, f.at, f.id
	FROM params p CROSS JOIN LATERAL (
		SELECT r.tenant, {S}.claim_at(r.ready_at, r.priority) AS at, r.id FROM {S}.runs r
		WHERE r.state = 'ready' AND r.queue = p.queue AND r.tenant > p.cursor
		ORDER BY r.tenant, {S}.claim_at(r.ready_at, r.priority), r.id LIMIT 1) f
	WHERE p.has
	UNION ALL
	SELECT p.queue, p.cursor, p.has, 1, f.tenant, f.at, f.id
	FROM params p CROSS JOIN LATERAL (
		SELECT r.tenant, {S}.claim_at(r.ready_at, r.priority) AS at, r.id FROM {S}.runs r
		WHERE r.state = 'ready' AND r.queue = p.queue
		ORDER BY r.tenant, {S}.claim_at(r.ready_at, r.priority), r.id LIMIT 1) f
	UNION ALL
	SELECT w.queue, w.cursor, w.wrapped, w.n + 1, f.tenant, f.at, f.id
	FROM walk w CROSS JOIN LATERAL (
		SELECT r.tenant, {S}.claim_at(r.ready_at, r.priority) AS at, r.id FROM {S}.runs r
		WHERE r.state = 'ready' AND r.queue = w.queue AND r.tenant > w.tenant
		ORDER BY r.tenant, {S}.claim_at(r.ready_at, r.priority), r.id LIMIT 1) f
	WHERE w.n < $4 AND NOT (w.wrapped AND w.tenant > w.cursor)
),
kept AS (
	SELECT k.queue, k.tenant, k.wrapped, k.at, k.id, ($4 + count(*) OVER q - 1) / count(*) OVER q AS share FROM (
		SELECT w.queue, w.tenant, w.wrapped, w.at, w.id,
			row_number() OVER (PARTITION BY w.queue ORDER BY w.wrapped, w.tenant) AS place
		FROM walk w WHERE NOT (w.wrapped AND w.tenant > w.cursor)
	) k WHERE k.place <= $4
	WINDOW q AS (PARTITION BY k.queue)
),
heads AS (
	SELECT k.queue, k.share, k.tenant, k.wrapped, c.id, c.tid, c.claim_at, c.holder,
		row_number() OVER (PARTITION BY k.queue, k.tenant ORDER BY c.claim_at, c.id) AS rank
	FROM kept k
	CROSS JOIN LATERAL (
		SELECT r.id, r.ctid AS tid, {S}.claim_at(r.ready_at, r.priority) AS claim_at,
			CASE WHEN r.ready_at > $3 THEN r.worker_id ELSE '' END AS holder
		FROM {S}.runs r
		WHERE r.state = 'ready' AND r.queue = k.queue AND r.tenant = k.tenant
			AND ({S}.claim_at(r.ready_at, r.priority), r.id) >= (k.at, k.id)
			AND (r.worker_id = '' OR r.ready_at <= $3 OR r.worker_id = ANY ($2::text[]))
		ORDER BY {S}.claim_at(r.ready_at, r.priority), r.id
		LIMIT k.share
		FOR UPDATE SKIP LOCKED
	) c
),
got AS (SELECT count(*) AS n FROM heads),
more AS (
	SELECT f.tenant, f.wrapped, c.id, c.tid, c.claim_at, c.holder,
		f.rank + row_number() OVER (PARTITION BY f.queue, f.tenant ORDER BY c.claim_at, c.id) AS rank
	FROM (SELECT h.queue, h.tenant, h.wrapped, h.claim_at, h.id, h.rank FROM heads h
		WHERE h.rank = h.share) f
	CROSS JOIN LATERAL (
		SELECT r.id, r.ctid AS tid, {S}.claim_at(r.ready_at, r.priority) AS claim_at,
			CASE WHEN r.ready_at > $3 THEN r.worker_id ELSE '' END AS holder
		FROM {S}.runs r
		WHERE r.state = 'ready' AND r.queue = f.queue AND r.tenant = f.tenant
			AND ({S}.claim_at(r.ready_at, r.priority), r.id) > (f.claim_at, f.id)
			AND (r.worker_id = '' OR r.ready_at <= $3 OR r.worker_id = ANY ($2::text[]))
		ORDER BY {S}.claim_at(r.ready_at, r.priority), r.id
		LIMIT $4 - (SELECT n FROM got)
		FOR UPDATE SKIP LOCKED
	) c
	WHERE (SELECT n FROM got) < $4
),
picked AS (
	SELECT h.tid AS key, h.holder,
		row_number() OVER (ORDER BY h.rank, h.wrapped, h.tenant, h.claim_at, h.id) AS ord
	FROM (SELECT tenant, wrapped, id, tid, claim_at, holder, rank FROM heads
		UNION ALL SELECT tenant, wrapped, id, tid, claim_at, holder, rank FROM more) h
	ORDER BY h.rank, h.wrapped, h.tenant, h.claim_at, h.id
	LIMIT $4
)`

// sqlClaimFair is the fair claim for one worker.
const sqlClaimFair = sqlClaimFairPick + `
UPDATE {S}.runs r SET state = 'running', fence = {FENCE}, worker_id = ($2::text[])[1], lease_until = {LEASE},
	updated_at = $6
WHERE r.ctid = ANY (ARRAY(SELECT key FROM picked))
RETURNING {RUN_R}`

// sqlClaimFairShared is the fair claim for several workers.
var sqlClaimFairShared = claimShared(sqlClaimFairPick, "$9", "ctid")
