package postgres

// Child links (see children.go), written with {S} and rendered per schema.
const (
	sqlChildInsert = `INSERT INTO {S}.children (child_id, parent_id, name, detached, created_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (child_id) DO NOTHING`
	sqlChildGet   = `SELECT child_id, parent_id, name, detached, created_at FROM {S}.children WHERE child_id = $1`
	sqlChildrenOf = `SELECT child_id, parent_id, name, detached, created_at FROM {S}.children WHERE parent_id = $1
ORDER BY created_at, child_id`
	// sqlChildrenToTell: finished children whose parent holds an open wait for the event (the
	// waits_event index finds the waiting parents; a parent's children come from children_parent).
	sqlChildrenToTell = `SELECT DISTINCT c.child_id, c.parent_id, c.name, c.detached, c.created_at
FROM {S}.waits w JOIN {S}.children c ON c.parent_id = w.run_id JOIN {S}.runs r ON r.id = c.child_id
WHERE w.event = $1 AND r.state IN ('completed', 'failed', 'cancelled')
ORDER BY c.parent_id, c.child_id LIMIT $2`
)
