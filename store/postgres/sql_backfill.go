package postgres

import "sync"

// The backfill ledger's statements (store/backfill.go; schema in migrations/005_backfills.up.sql
// and 019_backfill_tenant.up.sql), written with {S} like the rest and rendered once per schema.

const backfillCols = `run_id, name, checksum, status, app_version, rows_done, batches, cursor, total,
	error, started_at, updated_at, completed_at, tenant`

const (
	// sqlBackfillOpen adopts the run's row (a completed row stays as it is) or inserts it, in one
	// statement; xmax = 0 tells an inserted row from an updated one.
	sqlBackfillOpen = `INSERT INTO {S}.backfills (` + backfillCols + `)
		VALUES ($1, $2, $3, 'running', $4, $5, $6, $7, $8, '', $9, $10, NULL, $11)
		ON CONFLICT (run_id) DO UPDATE SET
			status     = CASE WHEN {S}.backfills.status = 'completed' THEN 'completed' ELSE 'running' END,
			error      = CASE WHEN {S}.backfills.status = 'completed' THEN {S}.backfills.error ELSE '' END,
			updated_at = CASE WHEN {S}.backfills.status = 'completed' THEN {S}.backfills.updated_at ELSE EXCLUDED.updated_at END,
			total      = CASE WHEN {S}.backfills.status <> 'completed' AND EXCLUDED.total >= 0 THEN EXCLUDED.total
			                  ELSE {S}.backfills.total END
		RETURNING ` + backfillCols + `, xmax <> 0`

	// sqlBackfillUpdate never rewinds a row unless $6 (a retry from an earlier page): a resend
	// older than what is recorded is ignored.
	sqlBackfillUpdate = `UPDATE {S}.backfills SET rows_done = $2, batches = $3, cursor = $4, updated_at = $5
		WHERE run_id = $1 AND status = 'running' AND (batches <= $3 OR $6::boolean)`

	sqlBackfillFinish = `UPDATE {S}.backfills SET
		rows_done    = CASE WHEN batches <= $3 THEN $2 ELSE rows_done END,
		cursor       = CASE WHEN batches <= $3 THEN $4 ELSE cursor END,
		batches      = greatest(batches, $3),
		status       = $5,
		error        = $6,
		updated_at   = $7,
		completed_at = CASE WHEN $5 = 'completed' THEN $7 ELSE completed_at END
		WHERE run_id = $1 AND status <> 'completed'`

	// sqlBackfillList: every filter is optional ('' selects all); $5 is a tenant, $6 asks for the
	// passes of no tenant when $5 names none.
	sqlBackfillList = `SELECT ` + backfillCols + ` FROM {S}.backfills
		WHERE ($1 = '' OR name = $1) AND ($2 = '' OR status = $2) AND ($3 = '' OR run_id = $3)
		AND ($5 = '' OR tenant = $5) AND ($5 <> '' OR NOT $6::boolean OR tenant = '')
		ORDER BY started_at DESC, run_id DESC LIMIT $4`

	// sqlBackfillListNewest is sqlBackfillList keeping the newest row of each (name, tenant), or
	// of each name when $7 (store.BackfillFilter.Newest).
	sqlBackfillListNewest = `SELECT ` + backfillCols + ` FROM (
		SELECT DISTINCT ON (name, CASE WHEN $7::boolean THEN '' ELSE tenant END) ` + backfillCols + ` FROM {S}.backfills
		WHERE ($1 = '' OR name = $1) AND ($2 = '' OR status = $2) AND ($3 = '' OR run_id = $3)
		AND ($5 = '' OR tenant = $5) AND ($5 <> '' OR NOT $6::boolean OR tenant = '')
		ORDER BY name, CASE WHEN $7::boolean THEN '' ELSE tenant END, started_at DESC, run_id DESC
	) newest
		ORDER BY started_at DESC, run_id DESC LIMIT $4`
)

var backfillSQL sync.Map // schema → map[string]string

// bq renders a backfill statement for the store's schema.
func (s *Store) bq(text string) string {
	m, ok := backfillSQL.Load(s.schema)
	if !ok {
		r := schemaReplacer(s.schema)
		rendered := map[string]string{}
		for _, t := range []string{sqlBackfillOpen, sqlBackfillUpdate, sqlBackfillFinish, sqlBackfillList, sqlBackfillListNewest} {
			rendered[t] = r.Replace(t)
		}
		m, _ = backfillSQL.LoadOrStore(s.schema, rendered)
	}
	return m.(map[string]string)[text]
}
