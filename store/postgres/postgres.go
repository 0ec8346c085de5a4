// Package postgres is the production store.Store: PostgreSQL through pgx/v5 and pgxpool, shared by
// any number of engine and worker processes.
//
// # Layout
//
// All tables live in one schema (Config.Schema, "jobs" by default), so the engine's tables can sit
// beside an application's own. Every statement names the schema explicitly ({S}.runs, …; see
// sql.go) rather than relying on search_path: a search_path set per connection (AfterConnect)
// would hold for this pool's own connections, but silently not for a connection that loses or
// never had that session state (DISCARD ALL or RESET ALL, a pooler in front of the server handing
// server connections from client to client), and the failure there is reading or writing another
// schema's tables. A qualified statement means the same thing on every connection.
//
// The schema is created and migrated by Migrate (Open calls it): the migrations are embedded
// (migrations/NNN_name.up.sql), recorded in <schema>.schema_migrations, and applied in one
// transaction under an advisory lock, so processes starting together migrate once.
//
// # Round trips
//
// A transaction here is a short series of pipelines (pgx.Batch): BEGIN travels in the first
// pipeline with the statements that lock and read, COMMIT in the last with the writes, and each
// pipeline is one round trip. Multi-row writes are one statement over arrays (unnest), so the
// count of round trips of a call does not grow with the number of rows. RunApply, the group-commit
// path, is two round trips for any batch: lock and read, then write and commit; a batch of steps
// is one statement in one round trip, and work that is one pipeline has no BEGIN or COMMIT
// statement at all (sendImplicit).
//
// # Locks
//
// Lock order, which is what keeps these transactions free of deadlocks: advisory locks first, in
// ascending key order (event names, slot keys); then run rows, always in id order and all in one
// statement; then the timer, wait and delivery rows of runs already locked. Timer and wait rows of
// a run are written only under its run row lock, so a transaction that holds the run lock reads
// them knowing nobody else is changing them. Claims, lease expiry and timer firing take run rows
// with SKIP LOCKED: they never wait on a row, they pass over it. One exception to the id order:
// a step batch (stmtStepsApply) updates its rows in its plan's order, without locking them first;
// the heartbeat, the one transaction that shares a batch's runs all the time, therefore passes
// over the rows it finds locked and renews each of them alone, so it never waits while holding.
//
// # Notifications
//
// Store implements store.Notifier with LISTEN/NOTIFY: every transaction that makes runs ready
// notifies "<schema>_ready" with the queue (marked when the runs are new, so a listener wakes
// one poller rather than all: notifyFresh), and every one that arms a timer notifies
// "<schema>_timer". Notifications are sent at commit and only if it commits.
package postgres

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// Config configures a Store.
type Config struct {
	// URL is the database, as a postgres:// URL or a key=value string (see pgxpool.ParseConfig;
	// pool_* parameters in it are honoured unless a field below overrides them). Required.
	URL string

	// Schema is the schema holding the engine's tables; Migrate creates it if it is missing. It
	// must be a plain lower-case identifier ([a-z_][a-z0-9_]*) of at most 57 bytes: it also
	// names the notification channels "<schema>_ready" and "<schema>_timer", and Postgres caps a
	// channel name at 63 bytes, and must not begin with "pg_" (reserved by Postgres). Defaults
	// to "jobs".
	Schema string

	// MaxConns is the most connections the pool opens. Group commit keeps the engine's writes on
	// few connections, but claims, heartbeats, timer firing and publishes each hold one for a
	// round trip or two. Subscribe uses a connection of its own, outside the pool. Defaults to 16.
	MaxConns int

	// MinConns is how many connections the pool keeps open: Open returns once they are, and the
	// pool reopens one that closes (a lifetime's end, a network error). A connection opened
	// under load makes its caller wait for the server's new process, authentication and the
	// connection's fence epoch (epoch.go: a synchronous commit that takes a lock, so connections
	// opening together take theirs one at a time); a pool that grows in a burst makes the
	// burst's first claims and wake-ups wait for that. Zero means the pool_min_conns of URL if
	// it names one, else MaxConns: the whole pool stays open. Negative keeps none open ahead;
	// each connection then opens when a caller first needs it.
	MinConns int

	// Logger receives what the store does on its own: the notification listener losing its
	// connection and reconnecting. Defaults to slog.Default().
	Logger *slog.Logger

	// WriteImpliedEvents writes every event as a history row, as versions before the run's row
	// held its first and last events did (implied.go). A process of such a version reads a
	// history without rebuilding those events, so set it on the new processes of a rolling
	// upgrade while an older one may still run, and drop it once none does. Reading is the
	// same either way.
	WriteImpliedEvents bool
}

const (
	defaultSchema   = "jobs"
	defaultMaxConns = 16
	maxSchemaLen    = 63 - len("_ready")
)

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	if c.URL == "" {
		return c, jobs.Errorf(jobs.CodeDriverUnavailable, "postgres: Config.URL is empty")
	}
	if c.Schema == "" {
		c.Schema = defaultSchema
	}
	if !schemaName.MatchString(c.Schema) || len(c.Schema) > maxSchemaLen {
		return c, jobs.Errorf(jobs.CodeBadRequest,
			"postgres: schema %q: want a lower-case identifier ([a-z_][a-z0-9_]*) of at most %d bytes",
			c.Schema, maxSchemaLen)
	}
	if strings.HasPrefix(c.Schema, "pg_") {
		// Postgres reserves the prefix for its own schemas and refuses to create one.
		return c, jobs.Errorf(jobs.CodeBadRequest, "postgres: schema %q: names beginning with pg_ are reserved by Postgres", c.Schema)
	}
	if c.MaxConns < 0 {
		return c, jobs.Errorf(jobs.CodeBadRequest, "postgres: MaxConns %d is negative", c.MaxConns)
	}
	if c.MaxConns == 0 {
		c.MaxConns = defaultMaxConns
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Store is the Postgres store. It is safe for concurrent use, from any number of processes.
type Store struct {
	pool      *pgxpool.Pool
	sql       *statements
	schema    string
	chReady   string          // NOTIFY channel: a run of the payload's queue became ready
	chTimer   string          // NOTIFY channel: a timer was armed
	listenCfg *pgx.ConnConfig // Subscribe's connections
	log       *slog.Logger
	// writeImplied: Config.WriteImpliedEvents.
	writeImplied bool

	// closing ends the listeners of Subscribe when the store closes; wg waits for them. mu
	// orders a Subscribe against Close, so no listener starts after Close has waited.
	closing context.Context
	close   context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	closed  bool
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Notifier = (*Store)(nil)
)

// Open migrates the schema (see Migrate) and opens a pool of connections to it.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	return open(ctx, cfg, nil)
}

// open is Open; tune, when set, adjusts the pool's configuration first (tests wrap the network
// connection with it).
func open(ctx context.Context, cfg Config, tune func(*pgxpool.Config)) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, jobs.Wrap(jobs.CodeDriverUnavailable, err, "postgres: parse URL")
	}
	pcfg.MaxConns = int32(cfg.MaxConns)
	switch {
	case cfg.MinConns < 0:
		pcfg.MinConns = 0
	case cfg.MinConns > 0:
		pcfg.MinConns = int32(cfg.MinConns)
	case pcfg.MinConns == 0: // neither the field nor the URL says
		pcfg.MinConns = pcfg.MaxConns
	}
	if pcfg.MinConns > pcfg.MaxConns {
		pcfg.MinConns = pcfg.MaxConns
	}
	if pcfg.MaxConnLifetimeJitter == 0 {
		// A pool opened at once would otherwise reach its connections' lifetime at once, and
		// reopen them all together (each with its epoch) every MaxConnLifetime.
		pcfg.MaxConnLifetimeJitter = pcfg.MaxConnLifetime / 5
	}
	if tune != nil {
		tune(pcfg)
	}
	if err := migrate(ctx, pcfg.ConnConfig, cfg.Schema, cfg.Logger); err != nil {
		return nil, err
	}
	closing, cancel := context.WithCancel(context.Background())
	s := &Store{
		sql:          newStatements(cfg.Schema),
		schema:       cfg.Schema,
		chReady:      cfg.Schema + "_ready",
		chTimer:      cfg.Schema + "_timer",
		listenCfg:    pcfg.ConnConfig.Copy(),
		log:          cfg.Logger,
		closing:      closing,
		writeImplied: cfg.WriteImpliedEvents,
		close:        cancel,
	}
	pcfg.AfterConnect = s.afterConnect(pcfg.AfterConnect) // fence epochs (epoch.go)
	if s.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		cancel()
		return nil, jobs.Wrap(jobs.CodeDriverUnavailable, err, "postgres: open pool")
	}
	if err := waitConns(ctx, s.pool, int(pcfg.MinConns)); err != nil {
		s.pool.Close()
		cancel()
		return nil, jobs.Wrap(jobs.CodeDriverUnavailable, err, "postgres: open the pool's connections")
	}
	s.wg.Add(1)
	go s.watchStats() // analyzes the hot tables as they outgrow their statistics (analyze.go)
	return s, nil
}

// waitConns returns once the pool holds n open connections, each with its fence epoch, or after
// openWait: pgxpool opens MinConns connections in the background as the pool is made, and Open
// waits for them. A store whose first seconds of work compete with its own connections opening,
// and wait behind their epochs' flushes, is slower than one that starts with them open: a bulk
// enqueue timed right after Open ran at 0.93–0.98× of River's instead of 1.00–1.16×
// (docs/architecture.md, "The pool opens whole as the store opens"). Should a connection fail to
// open, the background gives up and the wait ends at openWait: the pool opens connections on
// demand then, and a caller sees the server's refusal.
func waitConns(ctx context.Context, pool *pgxpool.Pool, n int) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for end := time.Now().Add(openWait); time.Now().Before(end); {
		st := pool.Stat()
		if int(st.TotalConns()-st.ConstructingConns()) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// openWait bounds how long Open waits for the pool's connections (waitConns).
const openWait = 10 * time.Second

// Close ends the listeners started by Subscribe and closes the pool, waiting for connections in
// use to be returned. Closing twice is harmless.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.close()
	s.wg.Wait()
	s.pool.Close()
	return nil
}

// q returns the statement named n, rendered for this store's schema.
func (s *Store) q(n stmt) string { return s.sql[n] }

// ---- transactions as pipelines ----

// txn is one transaction on one pooled connection, sent as pipelines: the first pipeline opens
// it (BEGIN goes ahead of its statements) and commit closes it (COMMIT goes after the last
// statements). A transaction of k dependent steps so costs k round trips, not k+2.
type txn struct {
	s     *Store
	op    string
	conn  *pgxpool.Conn
	begun bool
	done  bool
	// ext is the caller's own transaction when the work joins it (see tx.go): then there is no
	// BEGIN, no COMMIT and no connection of ours; the caller commits or rolls back.
	ext pgx.Tx
}

func (s *Store) begin(ctx context.Context, op string) (*txn, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, unavailable(op, err)
	}
	return &txn{s: s, op: op, conn: conn}, nil
}

// batch returns an empty pipeline; the transaction's first one starts with BEGIN.
func (t *txn) batch() *pgx.Batch {
	b := &pgx.Batch{}
	if !t.begun && t.ext == nil {
		b.Queue(t.s.q(stmtBegin))
		t.begun = true
	}
	return b
}

// sendBatch sends b on the transaction's connection: ours, or the caller's transaction.
func (t *txn) sendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.ext != nil {
		return t.ext.SendBatch(ctx, b)
	}
	return t.conn.SendBatch(ctx, b)
}

// send runs b, one round trip. Results are read by the callbacks queued with the statements.
func (t *txn) send(ctx context.Context, b *pgx.Batch) error {
	if err := t.sendBatch(ctx, b).Close(); err != nil {
		return unavailable(t.op, err)
	}
	return nil
}

// commit runs b followed by COMMIT, one round trip. An error is X_COMMIT_UNKNOWN when COMMIT may
// have reached the server and the answer was lost with the connection: the transaction may or
// may not have committed, and only reading the data again can tell. When the server answered
// with an error, or nothing was sent, it did not commit.
func (t *txn) commit(ctx context.Context, b *pgx.Batch) error {
	if t.ext != nil {
		return t.send(ctx, b) // the caller's commit, not ours
	}
	b.Queue(t.s.q(stmtCommit))
	err := t.conn.SendBatch(ctx, b).Close()
	t.done = true
	return commitErr(t.op, err)
}

// commitErr classifies the error of a pipeline that commits: X_COMMIT_UNKNOWN when the commit may
// have reached the server and the answer was lost with the connection, X_STORE_UNAVAILABLE when
// the server answered with an error or nothing was sent.
func commitErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || pgconn.SafeToRetry(err) {
		return unavailable(op, err)
	}
	return jobs.Wrap(jobs.CodeCommitUnknown, err, "postgres %s: the connection was lost with COMMIT in flight", op)
}

// sendImplicit runs b as one pipeline without BEGIN or COMMIT of its own, for work whose
// statements all travel in that one pipeline. pgx ends a pipeline with a single Sync, and
// Postgres runs every statement before a Sync in one implicit transaction: it commits at the
// Sync if all succeeded and rolls back entirely if one failed, exactly what BEGIN … COMMIT around
// them did, and settings made with set_config(…, true) hold until then as under SET LOCAL. What
// it saves is the server's work for the two statements: a bind, an execute and a portal each,
// per batch. Errors are classified as commit's.
func (s *Store) sendImplicit(ctx context.Context, op string, b *pgx.Batch) error {
	return commitErr(op, s.pool.SendBatch(ctx, b).Close())
}

// release returns the connection to the pool, first rolling back a transaction left open (a
// refusal or an error before commit). A connection that cannot roll back is closed rather than
// reused.
func (t *txn) release() {
	if t.ext != nil {
		return
	}
	pc := t.conn.Conn().PgConn()
	if !pc.IsClosed() && pc.TxStatus() != 'I' {
		// The caller's context may be the reason we are here (cancelled mid-call), so the
		// rollback gets a context of its own.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := t.conn.Exec(ctx, t.s.q(stmtRollback)); err != nil {
			_ = t.conn.Conn().Close(ctx)
		}
		cancel()
	}
	t.conn.Release()
}

// ---- errors ----

// unavailable wraps a database error as X_STORE_UNAVAILABLE; a *jobs.Error passes through.
func unavailable(op string, err error) error {
	var je *jobs.Error
	if errors.As(err, &je) {
		return err
	}
	return jobs.Wrap(jobs.CodeStoreUnavailable, err, "postgres %s", op)
}

// isUniqueViolation reports whether err is a unique violation of the named constraint (index).
func isUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraint
}

func notFound(id string) error { return jobs.Errorf(jobs.CodeRunNotFound, "run %s", id) }

// ---- lock keys ----

// lockKey is the advisory lock key of (schema, kind, name). It is computed here rather than with
// hashtext() in SQL so that a transaction taking several can sort them first: locks taken in one
// global order cannot deadlock. A collision of two names only makes them share a lock.
func (s *Store) lockKey(kind, name string) int64 {
	h := fnv.New64a()
	for _, p := range []string{s.schema, kind, name} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return int64(h.Sum64())
}

// eventLock serialises RunPublish and the lookback check of RunApply for one event name.
func (s *Store) eventLock(name string) int64 { return s.lockKey("event", name) }

func (s *Store) slotLock(key string) int64 { return s.lockKey("slot", key) }

// ---- values ----

// pgTime is t as Postgres keeps it: microseconds, and (read back by pgx) in UTC. Results built in
// Go pass through it so they equal what a later read returns.
func pgTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.Truncate(time.Microsecond).UTC()
}

// ts is t as a nullable timestamptz: the zero time is NULL.
func ts(t time.Time) pgtype.Timestamptz {
	if t.IsZero() {
		return pgtype.Timestamptz{}
	}
	return pgtype.Timestamptz{Time: t, Valid: true}
}

func fromTS(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

// strs makes a nil slice an empty one: pgx sends a nil slice as NULL, and NULL is not the empty
// array (a NULL match would match nothing).
func strs(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// scanRun reads a row of the run columns (runColumns, in that order).
// scanRun scans one run row. A QueryRow row releases the driver's buffer before its values can
// be used, so the state is read into a string of its own here.
func scanRun(row pgx.Row) (store.Run, error) {
	s := runScan{single: true}
	return s.scan(row)
}

// runScan holds the scan targets of a run row. The targets are addresses the driver keeps in an
// interface, so each one scanned into a local of its own escaped: five heap allocations a row
// (the run, its state and three timestamps) before a single value was read. One runScan serves
// every row of a result (collectRuns), and the scanned values are copied out of it.
//
// The text columns a result's rows mostly share (job, queue, tenant, worker, …) are read as the
// driver's bytes and made strings only when they differ from the previous row's, and a run id
// found in ids (a batch's own ids, sorted) is that string: a step batch's 16 rows otherwise
// allocated a string per column per row, the largest part of the group commit's garbage.
type runScan struct {
	r                      store.Run
	state                  pgtype.DriverBytes // interned (internState): a run is in one of a few states
	stateText              string             // the state of a single row (scanRun)
	single                 bool
	lease, ready, finished pgtype.Timestamptz
	dest                   []any
	ids                    []string // sorted; a scanned id found here is not copied
	at                     int      // the last row's place in ids, -1 if not there
	shared                 [numShared]pgtype.DriverBytes
	last                   [numShared]string // the previous row's strings of the shared columns;
	// a single row's strings (scanRun): its buffer is released before Scan returns
}

// The columns runScan reads as bytes, in runColumns order after id.
const (
	sharedID = iota
	sharedJob
	sharedQueue
	sharedTenant
	sharedEnqueuedBy
	sharedWorker
	sharedErrorCode
	sharedStopReason
	sharedTraceState
	numShared
)

func (s *runScan) scan(row pgx.Row) (store.Run, error) {
	if s.dest == nil {
		r := &s.r
		var state any = &s.state
		if s.single {
			state = &s.stateText
		}
		var sh [numShared]any
		for c := range sh {
			if s.single {
				sh[c] = &s.last[c]
			} else {
				sh[c] = &s.shared[c]
			}
		}
		s.dest = []any{sh[sharedID], sh[sharedJob], sh[sharedQueue], &r.Key, sh[sharedTenant], &r.NoTenant,
			sh[sharedEnqueuedBy], &r.Input, state, &r.Attempt, &r.Fence, sh[sharedWorker], &s.lease, &s.ready,
			&r.LastSeq, &r.Result, sh[sharedErrorCode], &r.Error, sh[sharedStopReason], &r.CreatedAt,
			&r.UpdatedAt, &s.finished, &r.TraceParent, sh[sharedTraceState], &r.Priority}
	}
	// Every target is written by a successful scan (a NULL bytea as nil); the driver copies the
	// bytes it scans into strings and byte slices, so the run shares no memory with the next
	// row's. The shared columns are the driver's buffer until text copies them.
	if err := row.Scan(s.dest...); err != nil {
		return store.Run{}, err
	}
	r := s.r
	if s.single {
		r.State = store.State(s.stateText)
	} else {
		r.State = internState(s.state)
	}
	r.ID = s.id()
	r.Job, r.Queue, r.Tenant = s.text(sharedJob), s.text(sharedQueue), s.text(sharedTenant)
	r.EnqueuedBy, r.WorkerID, r.ErrorCode = s.text(sharedEnqueuedBy), s.text(sharedWorker), s.text(sharedErrorCode)
	r.StopReason, r.TraceState = s.text(sharedStopReason), s.text(sharedTraceState)
	r.LeaseUntil, r.ReadyAt, r.FinishedAt = fromTS(s.lease), fromTS(s.ready), fromTS(s.finished)
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return r, nil
}

// text is shared column c as a string: the previous row's when the bytes are the same (a single
// row scanned it as a string already).
func (s *runScan) text(c int) string {
	if !s.single && string(s.shared[c]) != s.last[c] { // compares without a copy
		s.last[c] = string(s.shared[c])
	}
	return s.last[c]
}

// id is the row's run id: the string of ids it equals, whose place it leaves in at, or a copy
// (at -1).
func (s *runScan) id() string {
	s.at = -1
	if s.single {
		return s.last[sharedID]
	}
	b := s.shared[sharedID]
	lo, hi := 0, len(s.ids)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.ids[m] < string(b) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(s.ids) && s.ids[lo] == string(b) {
		s.at = lo
		return s.ids[lo]
	}
	return string(b)
}

// appendRuns appends every row of rows to out: a claim's rows are distinct runs, and need no
// map to find them by.
func appendRuns(rows pgx.Rows, out []store.Run) ([]store.Run, error) {
	defer rows.Close()
	var s runScan
	for rows.Next() {
		r, err := s.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// internState is the state named b (memory the driver reuses for the next row) without a copy.
func internState(b []byte) store.State {
	for _, st := range knownStates {
		if string(st) == string(b) {
			return st
		}
	}
	return store.State(b)
}

var knownStates = [...]store.State{store.StateRunning, store.StateReady, store.StateCompleted,
	store.StateSuspended, store.StateDelayed, store.StateFailed, store.StateCancelled, store.StateBlocked}

// collectRuns reads every row of rows into runs (keyed by id) and, if order is not nil, appends
// the ids in row order.
func collectRuns(rows pgx.Rows, into map[string]*store.Run, order *[]string) error {
	var s runScan
	for rows.Next() {
		r, err := s.scan(rows)
		if err != nil {
			return err
		}
		p := new(store.Run)
		*p = r
		into[r.ID] = p
		if order != nil {
			*order = append(*order, r.ID)
		}
	}
	return rows.Err()
}

// cloneRun copies the run's byte slices so a caller never aliases another caller's memory.
func cloneRun(r store.Run) store.Run {
	r.Input = slices.Clone(r.Input)
	r.Result = slices.Clone(r.Result)
	return r
}

// ---- multi-row writes ----

// eventRows accumulates history rows for one multi-row INSERT.
type eventRows struct {
	runs  []string
	seqs  []int64
	kinds []string
	names []string
	ats   []time.Time
	data  [][]byte
}

// grow makes room for n more rows without growing each column as they come.
func (w *eventRows) grow(n int) {
	w.runs, w.seqs, w.kinds = slices.Grow(w.runs, n), slices.Grow(w.seqs, n), slices.Grow(w.kinds, n)
	w.names, w.ats, w.data = slices.Grow(w.names, n), slices.Grow(w.ats, n), slices.Grow(w.data, n)
}

// add appends e to run r (whose LastSeq it advances) and returns the event as stored.
func (w *eventRows) add(r *store.Run, e history.Event) history.Event {
	r.LastSeq++
	e.Seq = r.LastSeq
	e.At = pgTime(e.At)
	e.Data = slices.Clone(e.Data)
	w.runs = append(w.runs, r.ID)
	w.seqs = append(w.seqs, e.Seq)
	w.kinds = append(w.kinds, string(e.Kind))
	w.names = append(w.names, e.Name)
	w.ats = append(w.ats, e.At)
	w.data = append(w.data, e.Data)
	return e
}

func (w *eventRows) queue(s *Store, b *pgx.Batch) {
	if len(w.runs) > 0 {
		b.Queue(s.q(stmtHistoryAppend), textArray(w.runs), int8Array(w.seqs), textArray(w.kinds), textArray(w.names),
			timeArray(w.ats), byteaArray(w.data))
	}
}

// timerRows accumulates timers to arm in one multi-row upsert. A key armed twice in one batch
// keeps the last (ON CONFLICT cannot touch one row twice in a statement).
type timerRows struct {
	idx  map[[2]string]int
	rows []timerRow
}

type timerRow struct {
	runID string
	store.Timer
}

func (w *timerRows) add(runID string, t store.Timer) {
	if w.idx == nil {
		w.idx = map[[2]string]int{}
	}
	k := [2]string{runID, t.Key}
	if i, ok := w.idx[k]; ok {
		w.rows[i].Timer = t
		return
	}
	w.idx[k] = len(w.rows)
	w.rows = append(w.rows, timerRow{runID, t})
}

// drop forgets the timers of run id (it finished in this batch: nothing is left to wake).
func (w *timerRows) drop(id string) {
	kept := w.rows[:0]
	for _, r := range w.rows {
		if r.runID != id {
			kept = append(kept, r)
		}
	}
	w.rows = kept
	clear(w.idx)
	for i, r := range w.rows {
		w.idx[[2]string{r.runID, r.Key}] = i
	}
}

func (w *timerRows) queue(s *Store, b *pgx.Batch) {
	if len(w.rows) == 0 {
		return
	}
	n := len(w.rows)
	runs, keys, fireKinds, fireNames := make([]string, n), make([]string, n), make([]*string, n), make([]string, n)
	dues, fireAts := make([]time.Time, n), make([]pgtype.Timestamptz, n)
	fireData := make([][]byte, n)
	for i, r := range w.rows {
		runs[i], keys[i], dues[i] = r.runID, r.Key, ceilMicro(r.DueAt)
		if r.Fire != nil {
			k := string(r.Fire.Kind)
			fireKinds[i], fireNames[i], fireAts[i], fireData[i] = &k, r.Fire.Name, ts(r.Fire.At), r.Fire.Data
		}
	}
	b.Queue(s.q(stmtTimersArm), textArray(runs), textArray(keys), timeArray(dues), fireKinds,
		textArray(fireNames), tsArray(fireAts), byteaArray(fireData))
	b.Queue(s.q(stmtNotify), s.chTimer, []string{""})
}

// notifyReady queues the wake-up notification for the queues of runs that became ready.
func (s *Store) notifyReady(b *pgx.Batch, queues []string) {
	if len(queues) == 0 {
		return
	}
	slices.Sort(queues)
	b.Queue(s.q(stmtNotify), s.chReady, slices.Compact(queues))
}

// freshMark starts the payload of a ready notification for new runs (store.Signal.Fresh). A
// listener that does not know it (an engine of an earlier version) reads a queue name that is
// not empty and wakes every poller, as it did for any ready notification; a queue whose name
// starts with it is read as fresh, which costs its suspended runs' wake-ups at most the
// pollers' fallback interval.
const freshMark = "\x1e"

// notifyFresh queues the wake-up notification for the queues of runs created ready: notifyReady's,
// each queue marked.
func (s *Store) notifyFresh(b *pgx.Batch, queues []string) {
	marked := make([]string, len(queues))
	for i, q := range queues {
		marked[i] = freshMark + q
	}
	s.notifyReady(b, marked)
}

// ceilMicro rounds t up to the microsecond, the resolution Postgres keeps: a due time cut down
// instead would be compared with a now that keeps its nanoseconds, and a timer would fire up to a
// microsecond before the time it was armed for, which the other stores never do.
func ceilMicro(t time.Time) time.Time {
	if c := t.Truncate(time.Microsecond); c.Before(t) {
		return c.Add(time.Microsecond)
	}
	return t
}
