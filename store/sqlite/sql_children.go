package sqlite

// Child links (see children.go).
const (
	sqlChildInsert = `INSERT INTO children (child_id, parent_id, name, detached, created_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (child_id) DO NOTHING`
	sqlChildGet   = `SELECT child_id, parent_id, name, detached, created_at FROM children WHERE child_id = ?`
	sqlChildrenOf = `SELECT child_id, parent_id, name, detached, created_at FROM children WHERE parent_id = ?
ORDER BY created_at, child_id`
	// sqlChildrenToTell: finished children whose parent holds an open wait for the event (the
	// waits_event index finds the waiting parents; a parent's children come from children_parent).
	sqlChildrenToTell = `SELECT c.child_id, c.parent_id, c.name, c.detached, c.created_at
FROM waits w JOIN children c ON c.parent_id = w.run_id JOIN runs r ON r.id = c.child_id
WHERE w.event = ? AND r.state IN ('completed', 'failed', 'cancelled')
GROUP BY c.child_id ORDER BY c.parent_id, c.child_id LIMIT ?`
)

// The write statements above are prepared with the others when the store opens (writeStatements
// in sql.go).
func init() {
	writeStatements = append(writeStatements, sqlChildInsert, sqlChildGet)
}
