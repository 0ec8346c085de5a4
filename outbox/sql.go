package outbox

// Every statement of the SQL stores, per dialect, with {T} for the table and {I} for its pending
// index (<table>_pending), both rendered quoted (see quoteName). The outbox table lives
// in the APPLICATION's database (staging joins the application's transaction), so its DDL is
// here, applied by SQLStore.Migrate or by the application's own migrations (PostgresDDL,
// SQLiteDDL), never by the engine's migrations.
//
// A row is in line (published_at and failed_at NULL), published (published_at set) or failed
// (failed_at set: the engine refused it for good and a relay set it aside). Failed rows keep
// published_at NULL, so they stay in the <table>_pending index: listing and counting them reads
// the same small index the claim does, and Prune never deletes them.

type dialect struct {
	name string
	ddl  string
	// added are the columns added to the table since its first release, as "name type": a
	// table an earlier version created lacks them, and Migrate adds them with addColumn.
	added     []string
	addColumn string

	stage         string
	claim         string
	markPublished string
	markFailed    string
	release       string
	backlog       string
	failed        string
	failedCount   string
	requeue       string
	setAside      string
	drop          string
	prune         string
}

// pgDialect: times are timestamptz (microseconds), id lists are text[].
var pgDialect = dialect{
	name: "postgres",
	ddl: `CREATE TABLE IF NOT EXISTS {T} (
	id            text PRIMARY KEY,
	job           text NOT NULL,
	request       bytea NOT NULL,
	staged_at     timestamptz NOT NULL,
	claimed_by    text,
	claimed_at    timestamptz,
	published_at  timestamptz,
	failed_at     timestamptz,
	error_code    text,
	error_message text
);
-- The relay's claim walks the unpublished rows in (staged_at, id) order.
CREATE INDEX IF NOT EXISTS {I} ON {T} (staged_at, id) WHERE published_at IS NULL;`,

	added:     []string{"failed_at timestamptz", "error_code text", "error_message text"},
	addColumn: `ALTER TABLE {T} ADD COLUMN IF NOT EXISTS `,

	stage: `INSERT INTO {T} (id, job, request, staged_at) VALUES ($1, $2, $3, $4)`,

	// The head of the rows in line is locked in order (FOR UPDATE, not SKIP LOCKED: a second
	// relay waits the few microseconds of this statement instead of skipping ahead of rows in
	// flight), and the prefix up to the first row another relay holds under a live claim is
	// stamped in the same statement. A relay that waited re-reads the rows it locked in their
	// newest version, so it sees the first relay's stamp and stops there.
	claim: `WITH head AS (
	SELECT id, staged_at, (claimed_at IS NOT NULL AND claimed_at > $3) AS held
	FROM {T} WHERE published_at IS NULL AND failed_at IS NULL
	ORDER BY staged_at, id LIMIT $4
	FOR UPDATE
), pick AS (
	SELECT id FROM (SELECT id, bool_or(held) OVER (ORDER BY staged_at, id) AS blocked FROM head) h
	WHERE NOT blocked
)
UPDATE {T} o SET claimed_by = $1, claimed_at = $2 FROM pick WHERE o.id = pick.id
RETURNING o.id, o.job, o.request, o.staged_at`,

	markPublished: `UPDATE {T} SET published_at = $3
WHERE id = ANY($2) AND claimed_by = $1 AND published_at IS NULL AND failed_at IS NULL`,

	markFailed: `UPDATE {T} SET failed_at = $3, error_code = $4, error_message = $5
WHERE id = $2 AND claimed_by = $1 AND published_at IS NULL AND failed_at IS NULL`,

	release: `UPDATE {T} SET claimed_by = NULL, claimed_at = NULL
WHERE id = ANY($2) AND claimed_by = $1 AND published_at IS NULL AND failed_at IS NULL`,

	backlog: `SELECT count(*), min(staged_at) FROM {T} WHERE published_at IS NULL AND failed_at IS NULL`,

	failed: `SELECT id, job, request, staged_at, claimed_by, claimed_at, failed_at, error_code, error_message
FROM {T} WHERE published_at IS NULL AND failed_at IS NOT NULL
ORDER BY staged_at, id LIMIT $1`,

	failedCount: `SELECT count(*) FROM {T} WHERE published_at IS NULL AND failed_at IS NOT NULL`,

	requeue: `UPDATE {T} SET failed_at = NULL, error_code = NULL, error_message = NULL, claimed_by = NULL, claimed_at = NULL
WHERE id = ANY($1) AND published_at IS NULL AND failed_at IS NOT NULL`,

	// The claim is cleared: the row leaves the line, and the relay that may hold it finds it
	// failed at its mark (which matches failed_at IS NULL) and leaves it so.
	setAside: `UPDATE {T} SET failed_at = $2, error_code = $3, error_message = $4, claimed_by = NULL, claimed_at = NULL
WHERE id = ANY($1) AND published_at IS NULL AND failed_at IS NULL`,

	drop: `DELETE FROM {T} WHERE id = ANY($1) AND published_at IS NULL AND failed_at IS NOT NULL`,

	prune: `DELETE FROM {T} WHERE published_at < $1`,
}

// sqliteDialect: times are INTEGER unix nanoseconds (UTC), id lists are JSON arrays. SQLite has
// one writer, so the claim's UPDATE is atomic on its own.
var sqliteDialect = dialect{
	name: "sqlite",
	ddl: `CREATE TABLE IF NOT EXISTS {T} (
	id            TEXT    NOT NULL PRIMARY KEY,
	job           TEXT    NOT NULL,
	request       BLOB    NOT NULL,
	staged_at     INTEGER NOT NULL,
	claimed_by    TEXT,
	claimed_at    INTEGER,
	published_at  INTEGER,
	failed_at     INTEGER,
	error_code    TEXT,
	error_message TEXT
);
CREATE INDEX IF NOT EXISTS {I} ON {T} (staged_at, id) WHERE published_at IS NULL;`,

	// SQLite has no ADD COLUMN IF NOT EXISTS: Migrate looks first.
	added:     []string{"failed_at INTEGER", "error_code TEXT", "error_message TEXT"},
	addColumn: `ALTER TABLE {T} ADD COLUMN `,

	stage: `INSERT INTO {T} (id, job, request, staged_at) VALUES (?1, ?2, ?3, ?4)`,

	claim: `UPDATE {T} SET claimed_by = ?1, claimed_at = ?2 WHERE id IN (
	SELECT id FROM (
		SELECT id, max(claimed_at IS NOT NULL AND claimed_at > ?3) OVER (ORDER BY staged_at, id) AS blocked
		FROM (SELECT id, staged_at, claimed_at FROM {T} WHERE published_at IS NULL AND failed_at IS NULL
		      ORDER BY staged_at, id LIMIT ?4)
	) WHERE blocked = 0
)
RETURNING id, job, request, staged_at`,

	markPublished: `UPDATE {T} SET published_at = ?3
WHERE id IN (SELECT value FROM json_each(?2)) AND claimed_by = ?1 AND published_at IS NULL AND failed_at IS NULL`,

	markFailed: `UPDATE {T} SET failed_at = ?3, error_code = ?4, error_message = ?5
WHERE id = ?2 AND claimed_by = ?1 AND published_at IS NULL AND failed_at IS NULL`,

	release: `UPDATE {T} SET claimed_by = NULL, claimed_at = NULL
WHERE id IN (SELECT value FROM json_each(?2)) AND claimed_by = ?1 AND published_at IS NULL AND failed_at IS NULL`,

	backlog: `SELECT count(*), min(staged_at) FROM {T} WHERE published_at IS NULL AND failed_at IS NULL`,

	failed: `SELECT id, job, request, staged_at, claimed_by, claimed_at, failed_at, error_code, error_message
FROM {T} WHERE published_at IS NULL AND failed_at IS NOT NULL
ORDER BY staged_at, id LIMIT ?1`,

	failedCount: `SELECT count(*) FROM {T} WHERE published_at IS NULL AND failed_at IS NOT NULL`,

	requeue: `UPDATE {T} SET failed_at = NULL, error_code = NULL, error_message = NULL, claimed_by = NULL, claimed_at = NULL
WHERE id IN (SELECT value FROM json_each(?1)) AND published_at IS NULL AND failed_at IS NOT NULL`,

	setAside: `UPDATE {T} SET failed_at = ?2, error_code = ?3, error_message = ?4, claimed_by = NULL, claimed_at = NULL
WHERE id IN (SELECT value FROM json_each(?1)) AND published_at IS NULL AND failed_at IS NULL`,

	drop: `DELETE FROM {T} WHERE id IN (SELECT value FROM json_each(?1)) AND published_at IS NULL AND failed_at IS NOT NULL`,

	prune: `DELETE FROM {T} WHERE published_at < ?1`,
}
