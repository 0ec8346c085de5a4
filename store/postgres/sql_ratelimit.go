package postgres

// Keyed rate limits (see ratelimit.go). Written with {S} and rendered per schema on first use.
const (
	sqlRateExpire = `DELETE FROM {S}.rate_starts WHERE key = $1 AND until_at <= $2`
	// sqlRateTake counts a start if fewer than $4 are counted, and returns whether it did and,
	// when not, the until_at of the start at offset n-$4: room comes back when it lapses. A
	// holder ($3) already counted is ok and not counted again. The reads see the snapshot before
	// the insert.
	sqlRateTake = `WITH held AS (SELECT EXISTS (SELECT 1 FROM {S}.rate_starts WHERE key = $1 AND holder = $3) AS h),
c AS (SELECT count(*) AS n FROM {S}.rate_starts WHERE key = $1),
ins AS (
	INSERT INTO {S}.rate_starts (key, until_at, holder) SELECT $1, $2, $3 FROM c, held WHERE c.n < $4 AND NOT held.h
	ON CONFLICT DO NOTHING RETURNING 1
)
SELECT (SELECT h FROM held) OR (SELECT n FROM c) < $4,
	(SELECT until_at FROM {S}.rate_starts WHERE key = $1 ORDER BY until_at, holder
		OFFSET GREATEST((SELECT n FROM c) - $4, 0) LIMIT 1)`
	sqlRatePrune = `DELETE FROM {S}.rate_starts WHERE until_at <= $1`
)
