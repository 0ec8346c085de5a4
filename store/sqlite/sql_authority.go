package sqlite

// Statements of the engine's secrets and the fleet's manifest (002_authority).
const (
	sqlKeyInsert = `INSERT INTO keys (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`
	sqlKeyGet    = `SELECT value FROM keys WHERE name = ?`
)
