package sqlite

// The backfill ledger's statements (store/backfill.go; schema in migrations/005_backfills.sql and
// 013_backfill_tenant.sql).

const backfillCols = `run_id, name, checksum, status, app_version, rows_done, batches, cursor, total,
	error, started_at, updated_at, completed_at, tenant`

const (
	sqlBackfillGet = `SELECT ` + backfillCols + ` FROM backfills WHERE run_id = ?`

	sqlBackfillInsert = `INSERT INTO backfills (` + backfillCols + `)
		VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, '', ?, ?, ?, ?)`

	// sqlBackfillAdopt: a retry adopts its own row; a completed row stays as it is.
	sqlBackfillAdopt = `UPDATE backfills SET status = 'running', error = '', updated_at = ?1,
		total = CASE WHEN ?3 >= 0 THEN ?3 ELSE total END
		WHERE run_id = ?2 AND status <> 'completed'`

	// sqlBackfillUpdate never rewinds a row unless ?6 (a retry from an earlier page): a resend
	// older than what is recorded is ignored.
	sqlBackfillUpdate = `UPDATE backfills SET rows_done = ?1, batches = ?2, cursor = ?3, updated_at = ?4
		WHERE run_id = ?5 AND status = 'running' AND (batches <= ?2 OR ?6 <> 0)`

	sqlBackfillFinish = `UPDATE backfills SET
		rows_done    = CASE WHEN batches <= ?2 THEN ?1 ELSE rows_done END,
		cursor       = CASE WHEN batches <= ?2 THEN ?3 ELSE cursor END,
		batches      = max(batches, ?2),
		status       = ?4,
		error        = ?5,
		updated_at   = ?6,
		completed_at = CASE WHEN ?4 = 'completed' THEN ?6 ELSE completed_at END
		WHERE run_id = ?7 AND status <> 'completed'`

	// sqlBackfillList: every filter is optional ('' selects all); ?5 is a tenant, ?6 (1 or 0)
	// asks for the passes of no tenant when ?5 names none.
	sqlBackfillList = `SELECT ` + backfillCols + ` FROM backfills
		WHERE (?1 = '' OR name = ?1) AND (?2 = '' OR status = ?2) AND (?3 = '' OR run_id = ?3)
		AND (CASE WHEN ?5 <> '' THEN tenant = ?5 WHEN ?6 <> 0 THEN tenant = '' ELSE 1 END)
		ORDER BY started_at DESC, run_id DESC LIMIT ?4`

	// sqlBackfillListNewest is sqlBackfillList keeping the newest row of each (name, tenant), or
	// of each name when ?7 is 1 (store.BackfillFilter.Newest).
	sqlBackfillListNewest = `SELECT ` + backfillCols + ` FROM (
		SELECT ` + backfillCols + `, row_number() OVER (PARTITION BY name, CASE WHEN ?7 <> 0 THEN '' ELSE tenant END
			ORDER BY started_at DESC, run_id DESC) AS nth
		FROM backfills
		WHERE (?1 = '' OR name = ?1) AND (?2 = '' OR status = ?2) AND (?3 = '' OR run_id = ?3)
		AND (CASE WHEN ?5 <> '' THEN tenant = ?5 WHEN ?6 <> 0 THEN tenant = '' ELSE 1 END)
	) WHERE nth = 1
		ORDER BY started_at DESC, run_id DESC LIMIT ?4`
)
