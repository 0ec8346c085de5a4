package postgres

// Statements of the engine's secrets and the fleet's manifest (002_authority). They are rare
// (once per engine start, once per worker's manifest), so they are rendered on use (s.qa) rather
// than added to the prepared set of sql.go.
const (
	sqlKeyEnsure = `
WITH ins AS (
	INSERT INTO {S}.keys (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING value
)
SELECT value FROM ins UNION ALL SELECT value FROM {S}.keys WHERE name = $1 LIMIT 1`
)
