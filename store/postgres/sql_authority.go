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

// The manifest. A put is one pipeline: the worker's row, its links cleared, then every
// declaration and link upserted from arrays (one statement each, whatever the manifest's size).
const (
	sqlManifestWorkerUpsert = `
INSERT INTO {S}.manifest_workers (worker_id, queues, last_seen) VALUES ($1, $2, $3)
ON CONFLICT (worker_id) DO UPDATE SET queues = excluded.queues, last_seen = excluded.last_seen`
	sqlDeclWorkersClear = `DELETE FROM {S}.declaration_workers WHERE worker_id = $1`
	sqlDeclsUpsert      = `
INSERT INTO {S}.declarations (kind, name, checksum, data, first_seen, last_seen)
SELECT k, n, c, d, $5, $5 FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[]) AS u(k, n, c, d)
ORDER BY k, n, c
ON CONFLICT (kind, name, checksum) DO UPDATE SET last_seen = excluded.last_seen`
	sqlDeclWorkersInsert = `
INSERT INTO {S}.declaration_workers (kind, name, checksum, worker_id, last_seen)
SELECT k, n, c, $4, $5 FROM unnest($1::text[], $2::text[], $3::text[]) AS u(k, n, c)
ON CONFLICT (kind, name, checksum, worker_id) DO UPDATE SET last_seen = excluded.last_seen`
	sqlDeclsRead = `
SELECT kind, name, checksum, data, first_seen, last_seen FROM {S}.declarations
WHERE $1 = '' OR kind = $1 ORDER BY kind, name, checksum`
	sqlDeclWorkersRead = `
SELECT kind, name, checksum, worker_id, last_seen FROM {S}.declaration_workers
WHERE $1 = '' OR kind = $1 ORDER BY worker_id`
	sqlManifestWorkersRead = `SELECT worker_id, queues, last_seen FROM {S}.manifest_workers ORDER BY worker_id`
)
