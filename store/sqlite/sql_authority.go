package sqlite

// Statements of the engine's secrets and the fleet's manifest (002_authority).
const (
	sqlKeyInsert = `INSERT INTO keys (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`
	sqlKeyGet    = `SELECT value FROM keys WHERE name = ?`
)

const (
	sqlManifestWorkerUpsert = `INSERT INTO manifest_workers (worker_id, queues, last_seen) VALUES (?, ?, ?)
	ON CONFLICT (worker_id) DO UPDATE SET queues = excluded.queues, last_seen = excluded.last_seen`
	sqlDeclUpsert = `INSERT INTO declarations (kind, name, checksum, data, first_seen, last_seen)
	VALUES (?, ?, ?, ?, ?, ?)
	ON CONFLICT (kind, name, checksum) DO UPDATE SET last_seen = excluded.last_seen`
	sqlDeclWorkersClear = `DELETE FROM declaration_workers WHERE worker_id = ?`
	sqlDeclWorkerInsert = `INSERT INTO declaration_workers (kind, name, checksum, worker_id, last_seen)
	VALUES (?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET last_seen = excluded.last_seen`
	sqlDeclsRead = `SELECT kind, name, checksum, data, first_seen, last_seen FROM declarations
	WHERE ? = '' OR kind = ? ORDER BY kind, name, checksum`
	sqlDeclWorkersRead = `SELECT kind, name, checksum, worker_id, last_seen FROM declaration_workers
	WHERE ? = '' OR kind = ? ORDER BY worker_id`
	sqlManifestWorkersRead = `SELECT worker_id, queues, last_seen FROM manifest_workers ORDER BY worker_id`
)

// The write statements above are prepared with the others when the store opens (writeStatements
// in sql.go); they are added from here so the list of this file's statements stays beside them.
func init() {
	writeStatements = append(writeStatements, sqlKeyInsert, sqlKeyGet,
		sqlManifestWorkerUpsert, sqlDeclUpsert, sqlDeclWorkersClear, sqlDeclWorkerInsert)
}
