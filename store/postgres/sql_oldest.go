package postgres

// The oldest-first claim's index, built on demand (oldest.go, 017_ready_on_demand). Written
// with {S} and rendered per schema on first use.
const (
	// sqlReadyIndexState is one row when runs_ready exists: whether it is valid, and whether a
	// build of it is under way. An index being built CONCURRENTLY is invalid until its build
	// ends; one whose build failed half-way stays invalid, and no plan uses it.
	sqlReadyIndexState = `SELECT i.indisvalid,
	EXISTS (SELECT 1 FROM pg_stat_progress_create_index p WHERE p.index_relid = i.indexrelid)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = 'runs_ready'`
	sqlReadyIndexDrop   = `DROP INDEX CONCURRENTLY IF EXISTS {S}.runs_ready`
	sqlReadyIndexCreate = `CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_ready ON {S}.runs (queue, ready_at, id)
WHERE state = 'ready'`
)
