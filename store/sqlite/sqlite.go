// Package sqlite is the embedded default backend of store.Store: one SQLite file, through
// modernc.org/sqlite (pure Go, so the engine builds and runs without cgo).
//
// # Connections
//
// A Store holds two pools on the same file:
//
//   - one write connection (a *sql.DB capped at one open connection). Every method that writes
//     runs one BEGIN IMMEDIATE transaction on it, so writes of this process queue for the
//     connection in Go instead of fighting over SQLite's lock (SQLITE_BUSY), and every rule that
//     must be race-free (idempotency, fencing, claiming, firing a timer once, matching an event
//     to waits) holds because those transactions never interleave. Another process opening the
//     same file also writes under BEGIN IMMEDIATE and waits up to Config.BusyTimeout for the
//     lock, so the rules hold across processes too.
//   - a read pool (Config.ReadConns connections, query_only) for RunGet, RunList, HistoryRead,
//     QueueStats and TimerNext. In WAL mode readers see the last committed state and never block
//     the writer.
//
// # Durability
//
// synchronous=FULL by default: a method that returned has its transaction fsynced, so a crash
// or a power loss loses nothing acknowledged. SynchronousNormal (in WAL mode) fsyncs only at
// checkpoints: a crash of the process loses nothing, a power loss may lose the last commits.
//
// # Schema
//
// The schema is created and upgraded by numbered migrations embedded from migrations/
// (NNN_name.sql), recorded in a schema_migrations ledger; Open applies the missing ones in one
// transaction. All SQL of the backend is in sql.go.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jobs "github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/store"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Synchronous is SQLite's synchronous setting for the write connection: how often a commit
// waits for the disk.
type Synchronous string

const (
	// SynchronousFull fsyncs the write-ahead log on every commit: a returned write survives a
	// power loss. The default, because durability is what a workflow engine sells.
	SynchronousFull Synchronous = "FULL"
	// SynchronousNormal fsyncs only when the log is checkpointed into the database: a returned
	// write survives a crash of the process but may be lost with the last few commits on a
	// power loss or an OS crash. Commits are several times cheaper.
	SynchronousNormal Synchronous = "NORMAL"
)

// Config configures a Store.
type Config struct {
	// Path is the database file. Required; ":memory:" and "file:" URIs are refused (the read
	// pool and the write connection must open the same file). The parent directory is created
	// (0700) if missing, and the file (0600): it holds the lease-token key and every payload.
	Path string

	// Synchronous is the write connection's durability setting. Defaults to SynchronousFull.
	Synchronous Synchronous

	// BusyTimeout is how long a statement waits for a lock held by another process sharing the
	// file before it fails. Within one process writes never wait on SQLite's lock (they queue
	// for the one write connection). Defaults to 5s.
	BusyTimeout time.Duration

	// ReadConns is the size of the read pool. Defaults to 4.
	ReadConns int

	// Clock stamps the migration ledger's applied_at; the store's methods never read it (their
	// times are passed in). Defaults to clock.Real{}.
	Clock clock.Clock

	// ReadOnly opens the file to read only: no lock is taken (an engine may hold the file), no
	// migration is applied, and every write is refused by SQLite (query_only). For programs and
	// tests that look at an engine's database while it runs. A missing file is refused, not
	// created.
	ReadOnly bool

	// unlocked skips the one-engine-per-file lock: only for this package's tests of the store's
	// rules between two stores sharing a file, which the lock otherwise refuses.
	unlocked bool
}

const (
	defaultBusyTimeout = 5 * time.Second
	defaultReadConns   = 4
)

// Store is the SQLite store.Store. It is safe for concurrent use.
type Store struct {
	w      *sql.DB // the one write connection
	r      *sql.DB // the read pool
	wStmts *stmtCache
	rStmts *stmtCache
	lock   *fileLock // held while open: one engine per database file (lock.go)
	// migrated is how many migrations Open applied (0: the file was up to date).
	migrated int
	// writes counts the write transactions begun: the one writer's turns, which the timer
	// path's tests count.
	writes atomic.Int64
	// statements counts the statements the write transactions ran: the writer's work per
	// call, which the timer path's tests pin (a claim, a fire, a record).
	statements atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database at cfg.Path and brings its schema up to date.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if cfg.ReadOnly {
		// A program that looks at an engine's file must not leave an empty database (and its
		// directory) behind a mistyped path.
		if _, err := os.Stat(cfg.Path); err != nil {
			return nil, jobs.Wrap(jobs.CodeDriverUnavailable, err, "sqlite: read-only open of %s: no database there", cfg.Path)
		}
	} else if err := prepareFile(cfg.Path); err != nil {
		return nil, err
	}
	lock := &fileLock{}
	if !cfg.unlocked && !cfg.ReadOnly {
		l, err := acquire(cfg.Path)
		if err != nil {
			return nil, err
		}
		lock = l
	}
	st, err := open(ctx, cfg)
	if err != nil {
		lock.release()
		return nil, err
	}
	st.lock = lock
	return st, nil
}

// prepareFile creates the database's directory (0700) if it is missing and the database file
// (0600) if it is missing, before SQLite opens it: the file holds the lease-token key and every
// payload, and SQLite gives the -wal and -shm files the database file's mode. A directory or a
// file that already exists keeps the mode its owner gave it.
func prepareFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return jobs.Wrap(jobs.CodeDriverUnavailable, err, "sqlite: create the directory of %s", path)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return jobs.Wrap(jobs.CodeDriverUnavailable, err, "sqlite: create %s", path)
	}
	return f.Close()
}

func open(ctx context.Context, cfg Config) (*Store, error) {
	busy := fmt.Sprintf(pragmaBusyTimeout, cfg.BusyTimeout.Milliseconds())
	pragmas := []string{busy, pragmaWAL, pragmaForeignKeys, fmt.Sprintf(pragmaSynchronous, cfg.Synchronous)}
	if cfg.ReadOnly {
		pragmas = []string{busy, pragmaQueryOnly, pragmaForeignKeys}
	}
	w, err := sql.Open("sqlite", dsn(cfg.Path, pragmas...))
	if err != nil {
		return nil, jobs.Wrap(jobs.CodeDriverUnavailable, err, "sqlite: open %s", cfg.Path)
	}
	// One write connection, kept open for the life of the store: the writer's serialisation is
	// what the race-free rules stand on, and reopening would lose its prepared statements.
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	// The first connection applies the pragmas, WAL among them, before the schema and before
	// any reader opens the file.
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, jobs.Wrap(jobs.CodeDriverUnavailable, err, "sqlite: open %s", cfg.Path)
	}
	migrated := 0
	if !cfg.ReadOnly {
		if migrated, err = migrateCount(ctx, w, migrationFiles, cfg.Clock.Now()); err != nil {
			w.Close()
			return nil, err
		}
	}
	wStmts := newStmtCache(w)
	if err := wStmts.prepare(ctx, writeStatements...); err != nil {
		wStmts.close()
		w.Close()
		return nil, jobs.Wrap(jobs.CodeDriverUnavailable, err, "sqlite: prepare")
	}
	r, err := sql.Open("sqlite", dsn(cfg.Path, busy, pragmaQueryOnly, pragmaForeignKeys))
	if err != nil {
		wStmts.close()
		w.Close()
		return nil, jobs.Wrap(jobs.CodeDriverUnavailable, err, "sqlite: open %s", cfg.Path)
	}
	r.SetMaxOpenConns(cfg.ReadConns)
	r.SetMaxIdleConns(cfg.ReadConns)
	if err := r.PingContext(ctx); err != nil {
		wStmts.close()
		w.Close()
		r.Close()
		return nil, jobs.Wrap(jobs.CodeDriverUnavailable, err, "sqlite: open %s", cfg.Path)
	}
	return &Store{w: w, r: r, wStmts: wStmts, rStmts: newStmtCache(r), migrated: migrated}, nil
}

func (cfg *Config) defaults() error {
	switch {
	case cfg.Path == "":
		return jobs.Errorf(jobs.CodeBadRequest, "sqlite: Config.Path is required")
	case cfg.Path == ":memory:" || strings.HasPrefix(cfg.Path, "file:"):
		return jobs.Errorf(jobs.CodeBadRequest, "sqlite: Config.Path must be a file path, not %q", cfg.Path)
	}
	switch cfg.Synchronous {
	case "":
		cfg.Synchronous = SynchronousFull
	case SynchronousFull, SynchronousNormal:
	default:
		return jobs.Errorf(jobs.CodeBadRequest, "sqlite: Config.Synchronous is %q; want FULL or NORMAL", cfg.Synchronous)
	}
	switch {
	case cfg.BusyTimeout == 0:
		cfg.BusyTimeout = defaultBusyTimeout
	case cfg.BusyTimeout < 0:
		return jobs.Errorf(jobs.CodeBadRequest, "sqlite: Config.BusyTimeout is negative (%s)", cfg.BusyTimeout)
	}
	switch {
	case cfg.ReadConns == 0:
		cfg.ReadConns = defaultReadConns
	case cfg.ReadConns < 0:
		return jobs.Errorf(jobs.CodeBadRequest, "sqlite: Config.ReadConns is negative (%d)", cfg.ReadConns)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	return nil
}

// dsn builds a modernc.org/sqlite data source name: a file: URI (so the path may hold any
// character) with _txlock=immediate (every transaction takes the write lock at BEGIN, so a
// transaction never fails halfway on upgrading a read lock) and the pragmas.
func dsn(path string, pragmas ...string) string {
	// Cleaned: a path beginning with "//" would otherwise read as a URI authority.
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.Clean(path))
	q := url.Values{"_txlock": {"immediate"}}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	return "file:" + esc + "?" + q.Encode()
}

// Close closes both pools. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.rStmts.close()
		s.wStmts.close()
		s.closeErr = errors.Join(s.r.Close(), s.w.Close())
		s.lock.release()
	})
	return s.closeErr
}

// stmtCache holds a pool's prepared statements, found by their text.
//
// The write statements (writeStatements) are prepared at Open, while the one write connection is
// idle: preparing on the *sql.DB needs a free connection, and during a transaction the only one
// is the transaction's, so a lazy prepare there would wait for itself forever. Inside a
// transaction, tx.StmtContext then reuses the connection's prepared statement, so a statement is
// parsed once for the life of the store. Read statements are prepared lazily (no read holds a
// connection while it looks one up).
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
	// misses counts write statements prepared inside a transaction because writeStatements
	// lacks them; a test keeps it at zero.
	misses atomic.Int64
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}}
}

// prepare prepares queries on the pool now.
func (c *stmtCache) prepare(ctx context.Context, queries ...string) error {
	for _, q := range queries {
		if _, err := c.get(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// get returns the statement, preparing it on the pool if it was not yet.
func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.m[query] = st
	return st, nil
}

// lookup returns the statement if it was prepared, never preparing it.
func (c *stmtCache) lookup(query string) (*sql.Stmt, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.m[query]
	return st, ok
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = map[string]*sql.Stmt{}
}

// wtx is one write transaction.
type wtx struct {
	ctx   context.Context
	tx    *sql.Tx
	cache *stmtCache
	count *atomic.Int64 // Store.statements
	// bound holds the transaction's handles of the statements it ran, so a statement run
	// once a row (a record batch's appends, a fire's wake-ups) is bound to the transaction
	// once, not once a row.
	bound map[string]*sql.Stmt
}

func (t *wtx) stmt(query string) (*sql.Stmt, error) {
	t.count.Add(1)
	if st, ok := t.bound[query]; ok {
		return st, nil
	}
	if st, ok := t.cache.lookup(query); ok {
		st = t.tx.StmtContext(t.ctx, st)
		if t.bound == nil {
			t.bound = make(map[string]*sql.Stmt, 8)
		}
		t.bound[query] = st
		return st, nil
	}
	// Not in writeStatements: correct, only slower (parsed on every use).
	t.cache.misses.Add(1)
	return t.tx.PrepareContext(t.ctx, query)
}

func (t *wtx) exec(query string, args ...any) (sql.Result, error) {
	st, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(t.ctx, args...)
}

func (t *wtx) query(query string, args ...any) (*sql.Rows, error) {
	st, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(t.ctx, args...)
}

func (t *wtx) queryRow(query string, args ...any) *sql.Row {
	st, err := t.stmt(query)
	if err != nil {
		// database/sql builds a *sql.Row with an error only itself: run the statement
		// unprepared, so the error (or the result) comes back through Scan.
		return t.tx.QueryRowContext(t.ctx, query, args...)
	}
	return st.QueryRowContext(t.ctx, args...)
}

// write runs fn in one write transaction and commits it. An error of fn that is a *jobs.Error is
// a refusal and is returned as is; any other error means the store failed.
func (s *Store) write(ctx context.Context, op string, fn func(t *wtx) error) error {
	s.writes.Add(1)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return failed(op, err)
	}
	if err := fn(&wtx{ctx: ctx, tx: tx, cache: s.wStmts, count: &s.statements}); err != nil {
		_ = tx.Rollback()
		return failed(op, err)
	}
	if err := tx.Commit(); err != nil {
		if errors.Is(err, sql.ErrTxDone) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			// The context ended before the commit: database/sql rolled the transaction
			// back, and nothing was committed.
			return failed(op, err)
		}
		// The commit reached SQLite and failed; a failed write or fsync of the log leaves
		// what the disk holds unknown: say so, and let the engine read the history back.
		return jobs.Wrap(jobs.CodeCommitUnknown, err, "sqlite: %s: commit", op)
	}
	return nil
}

// read runs a statement of the read pool.
func (s *Store) readQuery(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := s.rStmts.get(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// failed turns a database error into X_STORE_UNAVAILABLE (keeping it as the cause, so
// errors.Is(err, context.Canceled) still works); a *jobs.Error passes unchanged.
func failed(op string, err error) error {
	var je *jobs.Error
	if errors.As(err, &je) {
		return err
	}
	return jobs.Wrap(jobs.CodeStoreUnavailable, err, "sqlite: %s", op)
}

// Times are stored as unix nanoseconds. The zero time.Time (year 1, outside the range) is stored
// as minTime, so every time column is NOT NULL and sorts and compares like the Go value: zero
// first. Other times outside int64 nanoseconds (before 1678, after 2262) saturate to the nearest
// storable instant, which keeps "never" deadlines working.
const minTime = math.MinInt64

var (
	firstNano = time.Unix(0, math.MinInt64+1)
	lastNano  = time.Unix(0, math.MaxInt64)
)

func encTime(t time.Time) int64 {
	switch {
	case t.IsZero():
		return minTime
	case t.Before(firstNano):
		return math.MinInt64 + 1
	case t.After(lastNano):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func decTime(n int64) time.Time {
	if n == minTime {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// normTime is t as the store returns it once stored: UTC, without a monotonic reading.
func normTime(t time.Time) time.Time { return decTime(encTime(t)) }

// blob scans a BLOB column keeping NULL (nil) apart from an empty BLOB ([]byte{}), which
// database/sql's []byte scanning would merge into nil; the bytes are copied.
type blob struct{ p *[]byte }

func (b blob) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*b.p = nil
	case []byte:
		*b.p = append([]byte{}, v...)
	case string:
		*b.p = []byte(v)
	default:
		return fmt.Errorf("sqlite: scan %T into a blob", src)
	}
	return nil
}

// blobArg is the value to bind for b: nil stays NULL, an empty slice an empty BLOB.
func blobArg(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// nameArgs turns name, value, name, value… into sql.Named arguments.
func nameArgs(kv ...any) []any {
	out := make([]any, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, sql.Named(kv[i].(string), kv[i+1]))
	}
	return out
}

// collect reads every row with scan and closes rows, returning the first error of the scans, the
// iteration or the close.
func collect[T any](rows *sql.Rows, scan func(*sql.Rows) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

// Migrated returns how many migrations Open applied: 0 when the file was already up to date.
func (s *Store) Migrated() int { return s.migrated }
