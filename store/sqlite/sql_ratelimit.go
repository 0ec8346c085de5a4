package sqlite

// Keyed rate limits (see ratelimit.go).
const (
	sqlRateExpire = `DELETE FROM rate_starts WHERE key = ? AND until_at <= ?`
	sqlRateCount  = `SELECT count(*) FROM rate_starts WHERE key = ?`
	sqlRateHeld   = `SELECT count(*) FROM rate_starts WHERE key = ? AND holder = ?`
	// sqlRateNth is the until_at of the key's start at offset ? in order: when Limit starts are
	// still counted out of n, room comes back when the one at offset n-Limit lapses.
	sqlRateNth    = `SELECT until_at FROM rate_starts WHERE key = ? ORDER BY until_at, holder LIMIT 1 OFFSET ?`
	sqlRateInsert = `INSERT OR IGNORE INTO rate_starts (key, until_at, holder) VALUES (?, ?, ?)`
	sqlRatePrune  = `DELETE FROM rate_starts WHERE until_at <= ?`
)

// The rate statements are prepared with the others when the store opens.
func init() {
	writeStatements = append(writeStatements, sqlRateExpire, sqlRateCount, sqlRateHeld, sqlRateNth, sqlRateInsert, sqlRatePrune)
}
