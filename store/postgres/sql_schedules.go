package postgres

import "sync"

// The scheduler's statements, written like those of sql.go (with {S} for the schema) and
// rendered once per schema on first use.
type schedStmt int

const (
	stmtLeaderAcquire schedStmt = iota
	stmtLeaderGet
	stmtLeaderRelease
	stmtScheduleInsert
	stmtScheduleGet
	stmtScheduleLock
	stmtScheduleList
	stmtScheduleSave
	numSchedStmts
)

const scheduleCols = `name, watermark, last_fire, last_run_id, missed, paused, updated_at`

var schedSQLText = [numSchedStmts]string{
	// The role's row is taken when it is free, lapsed ($4 is now) or already ours.
	stmtLeaderAcquire: `
INSERT INTO {S}.leaders (role, holder, until) VALUES ($1, $2, $3)
ON CONFLICT (role) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until
WHERE {S}.leaders.holder = EXCLUDED.holder OR {S}.leaders.until <= $4`,
	// Read under a lock, so a fire and a takeover of the lease are serialised.
	stmtLeaderGet:     `SELECT holder, until FROM {S}.leaders WHERE role = $1 FOR UPDATE`,
	stmtLeaderRelease: `DELETE FROM {S}.leaders WHERE role = $1 AND holder = $2`,

	stmtScheduleInsert: `
INSERT INTO {S}.schedules (name, watermark, updated_at)
SELECT n, $2, $2 FROM unnest($1::text[]) AS n
ON CONFLICT (name) DO NOTHING`,
	stmtScheduleGet:  `SELECT ` + scheduleCols + ` FROM {S}.schedules WHERE name = ANY($1::text[])`,
	stmtScheduleLock: `SELECT ` + scheduleCols + ` FROM {S}.schedules WHERE name = $1 FOR UPDATE`,
	stmtScheduleList: `SELECT ` + scheduleCols + ` FROM {S}.schedules ORDER BY name COLLATE "C"`,
	stmtScheduleSave: `
UPDATE {S}.schedules SET watermark = $2, last_fire = $3, last_run_id = $4, missed = $5, paused = $6,
	updated_at = $7
WHERE name = $1`,
}

var schedSQL sync.Map // schema → *[numSchedStmts]string

// qs returns the scheduler statement n, rendered for this store's schema.
func (s *Store) qs(n schedStmt) string {
	if v, ok := schedSQL.Load(s.schema); ok {
		return v.(*[numSchedStmts]string)[n]
	}
	r := schemaReplacer(s.schema)
	var out [numSchedStmts]string
	for i, text := range schedSQLText {
		out[i] = r.Replace(text)
	}
	v, _ := schedSQL.LoadOrStore(s.schema, &out)
	return v.(*[numSchedStmts]string)[n]
}
