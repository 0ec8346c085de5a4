package sqlite

// Dedupe ids (see dedupe.go).
const (
	sqlDedupeGet    = `SELECT run_id FROM dedupe WHERE id = ?`
	sqlDedupeInsert = `INSERT INTO dedupe (id, run_id, created_at) VALUES (?, ?, ?)`
	sqlDedupePrune  = `DELETE FROM dedupe WHERE created_at < ?`
)
