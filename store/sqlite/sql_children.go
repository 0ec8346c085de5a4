package sqlite

// Child links (see children.go).
const (
	sqlChildInsert = `INSERT INTO children (child_id, parent_id, name, detached, created_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (child_id) DO NOTHING`
	sqlChildGet   = `SELECT child_id, parent_id, name, detached, created_at FROM children WHERE child_id = ?`
	sqlChildrenOf = `SELECT child_id, parent_id, name, detached, created_at FROM children WHERE parent_id = ?
ORDER BY created_at, child_id`
)

// The write statements above are prepared with the others when the store opens (writeStatements
// in sql.go).
func init() {
	writeStatements = append(writeStatements, sqlChildInsert, sqlChildGet)
}
