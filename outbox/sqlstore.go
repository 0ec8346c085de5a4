package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
)

// DefaultTable is the outbox table's name when the store is given none.
const DefaultTable = "jobs_outbox"

// SQLStore is the outbox Store over Postgres (pgx) or SQLite (database/sql). It keeps published
// rows with published_at as the audit trail; Prune deletes them once they are old enough.
type SQLStore struct {
	d     dialect
	db    conn
	table string
	sql   dialect // d with {T} rendered
}

var _ Store = (*SQLStore)(nil)

// tableName: a plain lower-case identifier, optionally schema-qualified. It is spliced into SQL
// (quoted, see quoteName), so nothing else is accepted.
var tableName = regexp.MustCompile(`^([a-z_][a-z0-9_]*\.)?[a-z_][a-z0-9_]*$`)

// NewPostgresStore returns the outbox store on pool's database; the relay's statements run on
// pool. Staging accepts a pgx transaction (Pgx) or a database/sql one (SQL) on the same database.
// A table name with a part over 63 bytes, which Postgres would cut short, is X_BAD_REQUEST.
func NewPostgresStore(pool *pgxpool.Pool, table string) (*SQLStore, error) {
	if pool == nil {
		return nil, jobs.Errorf(jobs.CodeInvariant, "outbox: no Postgres pool")
	}
	return newSQLStore(pgDialect, pgxConn{pool}, table)
}

// NewSQLiteStore returns the outbox store on db (a database/sql handle on SQLite). Staging
// accepts a database/sql transaction (SQL) on the same database.
func NewSQLiteStore(db *sql.DB, table string) (*SQLStore, error) {
	if db == nil {
		return nil, jobs.Errorf(jobs.CodeInvariant, "outbox: no database")
	}
	return newSQLStore(sqliteDialect, sqlConn{db}, table)
}

func newSQLStore(d dialect, db conn, table string) (*SQLStore, error) {
	if table == "" {
		table = DefaultTable
	}
	if !tableName.MatchString(table) {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "outbox: table %q: want a lower-case identifier, optionally schema-qualified", table)
	}
	if err := tableFits(d, table); err != nil {
		return nil, err
	}
	return &SQLStore{d: d, db: db, table: table, sql: render(d, table)}, nil
}

// maxPgName is the most bytes of a name Postgres keeps (NAMEDATALEN - 1).
const maxPgName = 63

// tableFits refuses, on Postgres, a table name with a part longer than Postgres keeps. Postgres
// cuts such a name to its first 63 bytes without an error, so two stores named apart only past
// them shared one table, each relay publishing the other's rows. SQLite keeps whole names.
func tableFits(d dialect, table string) error {
	if d.name != pgDialect.name {
		return nil
	}
	for _, part := range strings.Split(table, ".") {
		if len(part) > maxPgName {
			return jobs.Errorf(jobs.CodeBadRequest, "outbox: table %q: %q is %d bytes; Postgres keeps %d of a name, and two names alike in those would be one table", table, part, len(part), maxPgName)
		}
	}
	return nil
}

func render(d dialect, table string) dialect {
	index := table[strings.LastIndexByte(table, '.')+1:] + "_pending"
	r := strings.NewReplacer("{T}", quoteName(table), "{I}", quoteName(index))
	for _, p := range []*string{&d.ddl, &d.addColumn, &d.stage, &d.claim, &d.markPublished, &d.markFailed,
		&d.release, &d.backlog, &d.failed, &d.failedCount, &d.requeue, &d.setAside, &d.drop, &d.prune} {
		*p = r.Replace(*p)
	}
	return d
}

// quoteName quotes each part of a name tableName accepted ("app.order" is "app"."order"), for
// splicing into SQL. A lower-case name means the same quoted or not, in Postgres and in SQLite,
// but only quoted may it be a reserved word: tableName accepts "order" or "user", and spliced
// bare the store took such a name, then failed every statement (Migrate first) with a syntax
// error it reported as X_STORE_UNAVAILABLE, a failure a caller retries. tableName admits no
// double quote, so the quoting needs no escape.
func quoteName(name string) string {
	return `"` + strings.ReplaceAll(name, ".", `"."`) + `"`
}

// PostgresDDL is the outbox table's DDL for Postgres, for an application that applies its schema
// with its own migrations. It is idempotent (IF NOT EXISTS), and it also adds, to a table an
// earlier version created, the columns added since (failed_at, error_code, error_message):
// re-apply it on upgrade. table is checked as NewPostgresStore checks it ("" means DefaultTable);
// a name the store would refuse panics, as regexp.MustCompile does: the name is spliced into the
// SQL (quoted, see quoteName), and it is the application's constant, so a bad one is a
// programming mistake.
func PostgresDDL(table string) string {
	table = mustDDLTable(pgDialect, "PostgresDDL", table)
	d := render(pgDialect, table)
	ddl := d.ddl
	for _, c := range d.added {
		ddl += "\n" + d.addColumn + c + ";"
	}
	return ddl
}

// SQLiteDDL is the outbox table's DDL for SQLite; see PostgresDDL. SQLite has no ADD COLUMN IF
// NOT EXISTS, so a table an earlier version created is upgraded by Migrate, or by the
// application's own migration running, once: ALTER TABLE <table> ADD COLUMN failed_at INTEGER;
// ALTER TABLE <table> ADD COLUMN error_code TEXT; ALTER TABLE <table> ADD COLUMN error_message
// TEXT. A table name NewSQLiteStore would refuse panics, as in PostgresDDL.
func SQLiteDDL(table string) string {
	table = mustDDLTable(sqliteDialect, "SQLiteDDL", table)
	return render(sqliteDialect, table).ddl
}

// mustDDLTable is the table name newSQLStore takes, or a panic naming what is wrong with it.
func mustDDLTable(d dialect, fn, table string) string {
	if table == "" {
		return DefaultTable
	}
	if !tableName.MatchString(table) {
		panic(fmt.Sprintf("outbox: %s(%q): want a lower-case identifier, optionally schema-qualified, as the store takes", fn, table))
	}
	if err := tableFits(d, table); err != nil {
		panic(fmt.Sprintf("outbox: %s: %v", fn, err))
	}
	return table
}

// Migrate creates the outbox table if it is missing, and adds the columns a table an earlier
// version created lacks. It may run at every start: a table that is up to date is only read.
func (s *SQLStore) Migrate(ctx context.Context) error {
	for _, stmt := range strings.Split(s.sql.ddl, ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := s.db.exec(ctx, stmt); err != nil {
			return s.failed("migrate", err)
		}
	}
	for _, c := range s.sql.added {
		if err := s.addColumn(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// addColumn adds the column def ("name type") unless the table has it. It looks first, so an
// up-to-date table takes no ALTER's lock, and it looks again after an ALTER that failed: another
// process migrating at the same time may have added it.
func (s *SQLStore) addColumn(ctx context.Context, def string) error {
	name, _, _ := strings.Cut(def, " ")
	has := func() bool {
		rows, err := s.db.query(ctx, "SELECT "+name+" FROM "+quoteName(s.table)+" WHERE 1 = 0")
		if err != nil {
			return false
		}
		rows.Close()
		return rows.Err() == nil
	}
	if has() {
		return nil
	}
	if _, err := s.db.exec(ctx, s.sql.addColumn+def); err != nil && !has() {
		return s.failed("migrate: add column "+name, err)
	}
	return nil
}

// Stage implements Store.
func (s *SQLStore) Stage(ctx context.Context, tx Tx, rows []Row) error {
	switch tx.(type) {
	case pgxTx:
		if s.d.name != pgDialect.name {
			return jobs.Errorf(jobs.CodeOutboxNoTx, "outbox: a pgx transaction cannot stage into the %s outbox", s.d.name)
		}
	case sqlTx:
	default:
		return jobs.Errorf(jobs.CodeOutboxNoTx, "outbox: the %s outbox cannot stage into a %T", s.d.name, tx)
	}
	for _, r := range rows {
		req, err := msgpack.Marshal(r.Request)
		if err != nil {
			return jobs.Wrap(jobs.CodeEncoding, err, "outbox: encode the enqueue of %q", r.Request.Job)
		}
		if err := tx.exec(ctx, s.sql.stage, r.ID, r.Request.Job, req, s.timeArg(r.StagedAt)); err != nil {
			if txEnded(err) {
				// Committed or rolled back already: no retry can stage into it, so it is not
				// X_STORE_UNAVAILABLE (retryable) but a transaction this store cannot use, as
				// the memory store answers.
				return jobs.Wrap(jobs.CodeOutboxNoTx, err, "outbox: stage the enqueue of %q: the transaction has already ended", r.Request.Job)
			}
			// The caller's transaction failed, not ours: its error is what the caller must see.
			return jobs.Wrap(jobs.CodeStoreUnavailable, err, "outbox: stage the enqueue of %q", r.Request.Job)
		}
	}
	return nil
}

// txEnded reports whether err says the caller's transaction was committed or rolled back before
// the stage: database/sql's sql.ErrTxDone, pgx's pgx.ErrTxClosed.
func txEnded(err error) bool {
	return errors.Is(err, sql.ErrTxDone) || errors.Is(err, pgx.ErrTxClosed)
}

// Claim implements Store.
func (s *SQLStore) Claim(ctx context.Context, relay string, now time.Time, lease time.Duration, limit int) ([]Row, error) {
	if relay == "" || lease <= 0 || limit <= 0 {
		return nil, jobs.Errorf(jobs.CodeInvariant, "outbox claim: relay %q, lease %s, limit %d", relay, lease, limit)
	}
	rows, err := s.db.query(ctx, s.sql.claim, relay, s.timeArg(now), s.timeArg(now.Add(-lease)), limit)
	if err != nil {
		return nil, s.failed("claim", err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		r := Row{ClaimedBy: relay, ClaimedAt: now}
		var job string
		var req []byte
		var staged any
		if err := rows.Scan(&r.ID, &job, &req, &staged); err != nil {
			return nil, s.failed("claim", err)
		}
		r.StagedAt = s.scanTime(staged)
		if err := msgpack.Unmarshal(req, &r.Request); err != nil {
			// Unreadable, and unreadable on every claim: the relay sets it aside rather than
			// fail every pass on it.
			r.Request = jobs.EnqueueRequest{Job: job}
			r.ErrorCode = jobs.CodeEncoding
			r.ErrorMessage = "outbox row " + r.ID + ": decode the staged enqueue: " + err.Error()
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.failed("claim", err)
	}
	// RETURNING promises no order: put the batch back in the order the claim took it.
	slices.SortFunc(out, func(a, b Row) int {
		if c := a.StagedAt.Compare(b.StagedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// MarkPublished implements Store.
func (s *SQLStore) MarkPublished(ctx context.Context, relay string, ids []string, now time.Time) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	n, err := s.db.exec(ctx, s.sql.markPublished, relay, s.idsArg(ids), s.timeArg(now))
	if err != nil {
		return 0, s.failed("mark published", err)
	}
	return int(n), nil
}

// MarkFailed implements Store.
func (s *SQLStore) MarkFailed(ctx context.Context, relay, id string, code jobs.Code, message string, now time.Time) (bool, error) {
	n, err := s.db.exec(ctx, s.sql.markFailed, relay, id, s.timeArg(now), string(code), message)
	if err != nil {
		return false, s.failed("mark failed", err)
	}
	return n > 0, nil
}

// Release implements Store.
func (s *SQLStore) Release(ctx context.Context, relay string, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	n, err := s.db.exec(ctx, s.sql.release, relay, s.idsArg(ids))
	if err != nil {
		return 0, s.failed("release", err)
	}
	return int(n), nil
}

// Backlog implements Store.
func (s *SQLStore) Backlog(ctx context.Context) (int, time.Time, error) {
	rows, err := s.db.query(ctx, s.sql.backlog)
	if err != nil {
		return 0, time.Time{}, s.failed("backlog", err)
	}
	defer rows.Close()
	var n int64
	var oldest any
	if rows.Next() {
		if err := rows.Scan(&n, &oldest); err != nil {
			return 0, time.Time{}, s.failed("backlog", err)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, time.Time{}, s.failed("backlog", err)
	}
	return int(n), s.scanTime(oldest), nil
}

// Failed implements Store.
func (s *SQLStore) Failed(ctx context.Context, limit int) ([]Row, int, error) {
	if limit < 0 {
		return nil, 0, jobs.Errorf(jobs.CodeBadRequest, "outbox failed rows: limit %d", limit)
	}
	var total int64
	rows, err := s.db.query(ctx, s.sql.failedCount)
	if err != nil {
		return nil, 0, s.failed("failed rows", err)
	}
	if rows.Next() {
		err = rows.Scan(&total)
	}
	rows.Close()
	if err == nil {
		err = rows.Err()
	}
	if err != nil || total == 0 || limit == 0 {
		return nil, int(total), s.failedOrNil("failed rows", err)
	}
	if rows, err = s.db.query(ctx, s.sql.failed, limit); err != nil {
		return nil, 0, s.failed("failed rows", err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		var job string
		var req []byte
		var by, code, msg *string
		var staged, claimed, failed any
		if err := rows.Scan(&r.ID, &job, &req, &staged, &by, &claimed, &failed, &code, &msg); err != nil {
			return nil, 0, s.failed("failed rows", err)
		}
		r.StagedAt, r.ClaimedAt, r.FailedAt = s.scanTime(staged), s.scanTime(claimed), s.scanTime(failed)
		r.ClaimedBy, r.ErrorCode, r.ErrorMessage = deref(by), jobs.Code(deref(code)), deref(msg)
		if msgpack.Unmarshal(req, &r.Request) != nil {
			// Set aside because it could not be decoded: listed all the same, by its job.
			r.Request = jobs.EnqueueRequest{Job: job}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, s.failed("failed rows", err)
	}
	return out, max(int(total), len(out)), nil
}

// Requeue implements Store.
func (s *SQLStore) Requeue(ctx context.Context, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	n, err := s.db.exec(ctx, s.sql.requeue, s.idsArg(ids))
	if err != nil {
		return 0, s.failed("requeue", err)
	}
	return int(n), nil
}

// SetAside implements Store.
func (s *SQLStore) SetAside(ctx context.Context, ids []string, code jobs.Code, message string, now time.Time) (int, error) {
	if err := checkSetAside(code); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	n, err := s.db.exec(ctx, s.sql.setAside, s.idsArg(ids), s.timeArg(now), string(code), boundMessage(message))
	if err != nil {
		return 0, s.failed("set aside", err)
	}
	return int(n), nil
}

// Drop implements Store.
func (s *SQLStore) Drop(ctx context.Context, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	n, err := s.db.exec(ctx, s.sql.drop, s.idsArg(ids))
	if err != nil {
		return 0, s.failed("drop", err)
	}
	return int(n), nil
}

// Prune deletes rows published before before; it returns how many.
func (s *SQLStore) Prune(ctx context.Context, before time.Time) (int, error) {
	n, err := s.db.exec(ctx, s.sql.prune, s.timeArg(before))
	if err != nil {
		return 0, s.failed("prune", err)
	}
	return int(n), nil
}

func (s *SQLStore) timeArg(t time.Time) any {
	if s.d.name == sqliteDialect.name {
		return t.UTC().UnixNano()
	}
	return t
}

func (s *SQLStore) scanTime(v any) time.Time {
	switch t := v.(type) {
	case time.Time:
		return t.UTC()
	case int64:
		return time.Unix(0, t).UTC()
	}
	return time.Time{}
}

func (s *SQLStore) idsArg(ids []string) any {
	if s.d.name == sqliteDialect.name {
		b, _ := json.Marshal(ids)
		return string(b)
	}
	return ids
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *SQLStore) failedOrNil(op string, err error) error {
	if err == nil {
		return nil
	}
	return s.failed(op, err)
}

func (s *SQLStore) failed(op string, err error) error {
	var je *jobs.Error
	if errors.As(err, &je) {
		return err
	}
	return jobs.Wrap(jobs.CodeStoreUnavailable, err, "outbox %s %s", s.d.name, op)
}

// conn is what the relay's statements run on: a pgx pool or a database/sql handle.
type conn interface {
	query(ctx context.Context, q string, args ...any) (rowsIter, error)
	exec(ctx context.Context, q string, args ...any) (int64, error)
}

type rowsIter interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

type pgxConn struct{ pool *pgxpool.Pool }

func (c pgxConn) query(ctx context.Context, q string, args ...any) (rowsIter, error) {
	rows, err := c.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgxRows{rows}, nil
}

func (c pgxConn) exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := c.pool.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

type pgxRows struct{ pgx.Rows }

func (r pgxRows) Close() { r.Rows.Close() }

type sqlConn struct{ db *sql.DB }

func (c sqlConn) query(ctx context.Context, q string, args ...any) (rowsIter, error) {
	rows, err := c.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (c sqlConn) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := c.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }
