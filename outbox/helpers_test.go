package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// backend is one outbox store over the application's database, with the engine store of the same
// kind (memory with memory, SQLite with SQLite, Postgres with Postgres).
type backend struct {
	name   string
	outbox Store
	// begin opens a transaction of the application's database.
	begin func(t *testing.T) (tx Tx, commit, rollback func() error)
	// engineStore opens the engine's store.
	engineStore func(t *testing.T) store.Store
	// published counts rows with published_at set (the SQL stores keep them); -1 when the
	// store drops them.
	published func(t *testing.T) int
	// SQL stores only: table is the outbox's table, exec runs a statement on the application's database (no arguments),
	// qualify names a table in the test's schema, and sqlStore opens the store on a table.
	table    string
	exec     func(t *testing.T, q string)
	qualify  func(name string) string
	sqlStore func(t *testing.T, table string) *SQLStore
}

func backends(t *testing.T) []backend {
	mem := NewMemoryStore()
	out := []backend{{
		name:   "memory",
		outbox: mem,
		begin: func(t *testing.T) (Tx, func() error, func() error) {
			tx := mem.Begin()
			return tx, tx.Commit, tx.Rollback
		},
		engineStore: func(t *testing.T) store.Store { return testenv.Backends()[0].Open(t) },
		published:   func(*testing.T) int { return -1 },
	}}

	// SQLite: the application's own file, apart from the engine's.
	path := filepath.Join(t.TempDir(), "app.db")
	q := url.Values{"_txlock": {"immediate"}}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	lite, err := NewSQLiteStore(db, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := lite.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	out = append(out, backend{
		name:   "sqlite",
		outbox: lite,
		table:  DefaultTable,
		begin: func(t *testing.T) (Tx, func() error, func() error) {
			tx, err := db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return SQL(tx), tx.Commit, tx.Rollback
		},
		engineStore: func(t *testing.T) store.Store { return testenv.OpenSQLite(t) },
		published: func(t *testing.T) int {
			return countSQL(t, db, "SELECT count(*) FROM jobs_outbox WHERE published_at IS NOT NULL")
		},
		exec: func(t *testing.T, q string) {
			t.Helper()
			if _, err := db.ExecContext(t.Context(), q); err != nil {
				t.Fatal(err)
			}
		},
		qualify: func(name string) string { return name },
		sqlStore: func(t *testing.T, table string) *SQLStore {
			s, err := NewSQLiteStore(db, table)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	})

	if pgURL, schema, ok := pgSchema(t); ok {
		pool, err := pgxpool.New(context.Background(), pgURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		if _, err := pool.Exec(context.Background(), "CREATE SCHEMA "+schema); err != nil {
			t.Fatal(err)
		}
		table := schema + ".app_outbox"
		pg, err := NewPostgresStore(pool, table)
		if err != nil {
			t.Fatal(err)
		}
		if err := pg.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		out = append(out, backend{
			name:   "postgres",
			outbox: pg,
			table:  table,
			begin: func(t *testing.T) (Tx, func() error, func() error) {
				tx, err := pool.Begin(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				return Pgx(tx), func() error { return tx.Commit(context.Background()) },
					func() error { return tx.Rollback(context.Background()) }
			},
			engineStore: func(t *testing.T) store.Store { return testenv.OpenPostgres(t) },
			published: func(t *testing.T) int {
				var n int
				if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM "+table+" WHERE published_at IS NOT NULL").Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			},
			exec: func(t *testing.T, q string) {
				t.Helper()
				if _, err := pool.Exec(t.Context(), q); err != nil {
					t.Fatal(err)
				}
			},
			qualify: func(name string) string { return schema + "." + name },
			sqlStore: func(t *testing.T, table string) *SQLStore {
				s, err := NewPostgresStore(pool, table)
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
		})
	}
	return out
}

// pgSchema is a fresh schema name on TEST_DATABASE_URL, dropped at cleanup; ok is false without
// a database.
func pgSchema(t *testing.T) (string, string, bool) {
	if !hasPostgres() {
		return "", "", false
	}
	u, schema := testenv.FreshSchema(t)
	return u, schema, true
}

func countSQL(t *testing.T, db *sql.DB, q string) int {
	var n int
	if err := db.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// eachBackend runs f per backend with an engine over a store of the same kind.
func eachBackend(t *testing.T, f func(t *testing.T, b backend, env *testenv.Env)) {
	eachBackendWith(t, testenv.Options{}, f)
}

// eachBackendWith is eachBackend with the engine's options (its Store is the backend's).
func eachBackendWith(t *testing.T, o testenv.Options, f func(t *testing.T, b backend, env *testenv.Env)) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			o := o
			o.Store = b.engineStore(t)
			env := testenv.Start(t, o)
			f(t, b, env)
		})
	}
}

type Note struct {
	ID string `json:"id"`
}

var noteJob = jobs.MustDefine("note",
	func(in Note) string { return "note:" + in.ID }, jobs.NoTenant[Note](),
	func(c *jobs.Ctx, in Note) (string, error) { return "noted " + in.ID, nil })

// stage stages one note per id in one transaction and commits it.
func stage(t *testing.T, b backend, ob *Outbox, ids ...string) []string {
	t.Helper()
	tx, commit, _ := b.begin(t)
	var rows []string
	for _, id := range ids {
		res, err := noteJob.EnqueueTx(t.Context(), ob.Tx(tx), Note{ID: id})
		if err != nil {
			t.Fatalf("stage %s: %v", id, err)
		}
		if res.Staged == "" || res.RunID != "" {
			t.Fatalf("stage %s: %+v, want a staged row and no run yet", id, res)
		}
		rows = append(rows, res.Staged)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	return rows
}

func newOutbox(t *testing.T, b backend, env *testenv.Env, mode Mode) *Outbox {
	ob, err := New(Config{Store: b.outbox, Direct: env.Engine, Mode: mode, Clock: env.Clock})
	if err != nil {
		t.Fatal(err)
	}
	return ob
}

// recorder is a Publisher that counts publishes per key and keeps their order.
type recorder struct {
	next  jobs.Enqueuer
	mu    sync.Mutex
	keys  []string
	res   []jobs.EnqueueResult
	fail  map[string]int // key → publishes still to fail
	tries map[string]int // key → publishes tried, failed or not
}

func (r *recorder) Enqueue(ctx context.Context, req jobs.EnqueueRequest) (jobs.EnqueueResult, error) {
	r.mu.Lock()
	if r.tries == nil {
		r.tries = map[string]int{}
	}
	r.tries[req.Key]++
	if r.fail[req.Key] > 0 {
		r.fail[req.Key]--
		r.mu.Unlock()
		return jobs.EnqueueResult{}, jobs.Errorf(jobs.CodeStoreUnavailable, "injected publish failure of %s", req.Key)
	}
	r.mu.Unlock()
	res, err := r.next.Enqueue(ctx, req)
	if err == nil {
		r.mu.Lock()
		r.keys = append(r.keys, req.Key)
		r.res = append(r.res, res)
		r.mu.Unlock()
	}
	return res, err
}

func (r *recorder) tried(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tries[key]
}

func (r *recorder) published() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.keys)
}

func newRelay(t *testing.T, b backend, env *testenv.Env, pub jobs.Enqueuer, id string, batch int) *Relay {
	t.Helper()
	r, err := NewRelay(RelayConfig{Store: b.outbox, Publisher: pub, ID: id, Batch: batch, Clock: env.Clock,
		Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func pass(t *testing.T, r *Relay) int {
	t.Helper()
	n, err := r.Pass(t.Context())
	if err != nil {
		t.Fatalf("relay %s pass: %v", r.ID(), err)
	}
	return n
}

// runsOf lists the note runs by key.
func runsOf(t *testing.T, env *testenv.Env) map[string][]store.Run {
	t.Helper()
	runs, err := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "note", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]store.Run{}
	for _, r := range runs {
		out[r.Key] = append(out[r.Key], r)
	}
	return out
}

func keys(ids ...string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = "note:" + id
	}
	return out
}

func wantCode(t *testing.T, what string, err error, c jobs.Code) {
	t.Helper()
	if jobs.CodeOf(err) != c {
		t.Errorf("%s: %v, want %s", what, err, c)
	}
}

func sprint(v any) string { return fmt.Sprint(v) }

func workerConfig() worker.Config { return worker.Config{} }
