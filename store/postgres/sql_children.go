package postgres

// Child links (see children.go), written with {S} and rendered per schema.
const (
	sqlChildInsert = `INSERT INTO {S}.children (child_id, parent_id, name, detached, created_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (child_id) DO NOTHING`
	sqlChildGet   = `SELECT child_id, parent_id, name, detached, created_at FROM {S}.children WHERE child_id = $1`
	sqlChildrenOf = `SELECT child_id, parent_id, name, detached, created_at FROM {S}.children WHERE parent_id = $1
ORDER BY created_at, child_id`
)
