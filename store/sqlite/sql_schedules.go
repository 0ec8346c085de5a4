package sqlite

// The scheduler's statements (see sql.go for the conventions): the leader's lease row and each
// schedule's state.
const (
	// sqlLeaderAcquire takes the role's row when it is free, lapsed, or already ours.
	sqlLeaderAcquire = `INSERT INTO leaders (role, holder, until) VALUES (?, ?, ?)
	ON CONFLICT (role) DO UPDATE SET holder = excluded.holder, until = excluded.until
	WHERE leaders.holder = excluded.holder OR leaders.until <= ?`
	sqlLeaderGet     = `SELECT holder, until FROM leaders WHERE role = ?`
	sqlLeaderRelease = `DELETE FROM leaders WHERE role = ? AND holder = ?`

	scheduleCols      = `name, watermark, last_fire, last_run_id, missed, paused, updated_at`
	sqlScheduleInsert = `INSERT INTO schedules (name, watermark, last_fire, updated_at) VALUES (?, ?, ?, ?)
	ON CONFLICT (name) DO NOTHING`
	sqlScheduleGet  = `SELECT ` + scheduleCols + ` FROM schedules WHERE name = ?`
	sqlScheduleList = `SELECT ` + scheduleCols + ` FROM schedules ORDER BY name`
	sqlScheduleSave = `UPDATE schedules SET watermark = ?, last_fire = ?, last_run_id = ?, missed = ?,
	paused = ?, updated_at = ? WHERE name = ?`
)
