package systems

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/outbox"
	"github.com/ultimat3/jobs/store/postgres"
)

// Section 9 for our engine: bulk enqueue, enqueue in the caller's transaction (the run itself,
// or an outbox row) against a plain INSERT in the same transaction, and the relay.

var (
	_ BulkInserter = (*jobsSystem)(nil)
	_ TxEnqueuer   = (*jobsSystem)(nil)
)

// noopDef is the no-op job these scenarios enqueue.
var noopDef = jobs.MustDefine("noop", func(i int) string { return fmt.Sprint(i) }, jobs.NoTenant[int](),
	func(*jobs.Ctx, int) (int, error) { return 0, nil })

// sideEngine is an engine over the run's store that accepts jobs no worker declared and is not
// started: these scenarios measure writing runs, and no worker runs them (River's insert-only
// client is the same). Unstarted, an engine writes each enqueue straight to the store.
func (s *jobsSystem) sideEngine() (*engine.Engine, error) {
	return engine.New(engine.Config{Store: s.st, AllowUndeclared: true, Logger: quietLogger()})
}

func (s *jobsSystem) appPool(ctx context.Context, size int) (*pgxpool.Pool, error) {
	if s.backend != "postgres" {
		return nil, Unsupported("measured on Postgres")
	}
	cfg, err := pgxpool.ParseConfig(s.dbURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(size)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, pool.Close)
	return pool, nil
}

func countRows(ctx context.Context, pool *pgxpool.Pool, table string) (int, error) {
	var n int
	err := pool.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n)
	return n, err
}

func (s *jobsSystem) BulkInsert(ctx context.Context, n int) (Measure, error) {
	pool, err := s.appPool(ctx, 2)
	if err != nil {
		return nil, err
	}
	eng, err := s.sideEngine()
	if err != nil {
		return nil, err
	}
	ins := make([]int, n)
	for i := range ins {
		ins[i] = i
	}
	runtime.GC()
	return func(ctx context.Context) (Result, error) {
		items, err := noopDef.EnqueueMany(ctx, eng, ins)
		if err != nil {
			return Result{}, err
		}
		for i, it := range items {
			if it.Error != nil || it.RunID == "" || it.Deduped {
				return Result{}, fmt.Errorf("item %d: %+v", i, it)
			}
		}
		count, err := countRows(ctx, pool, "jobs.runs")
		if err != nil {
			return Result{}, err
		}
		return Result{Units: count, Backend: s.backend, Note: "Job.EnqueueMany"}, nil
	}, nil
}

// txApp creates the application's tables: orders (the caller's own write) and plain (the
// "enqueue" of the plain-INSERT baseline: a row of about a run's input and key).
func txApp(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, `CREATE TABLE app_orders (id bigint PRIMARY KEY, total bigint NOT NULL);
CREATE TABLE app_plain (id bigint PRIMARY KEY, key text NOT NULL, payload bytea NOT NULL)`)
	return err
}

func (s *jobsSystem) TxEnqueue(ctx context.Context, scenario string, n, concurrency int) (Measure, error) {
	pool, err := s.appPool(ctx, concurrency+2)
	if err != nil {
		return nil, err
	}
	if err := txApp(ctx, pool); err != nil {
		return nil, err
	}
	eng, err := s.sideEngine()
	if err != nil {
		return nil, err
	}
	var enqueue func(ctx context.Context, tx pgx.Tx, i int) error
	var check string
	note := ""
	switch scenario {
	case ScenarioTxPlain:
		payload, _ := jobs.Encode(1)
		enqueue = func(ctx context.Context, tx pgx.Tx, i int) error {
			_, err := tx.Exec(ctx, `INSERT INTO app_plain (id, key, payload) VALUES ($1, $2, $3)`, i, fmt.Sprint(i), payload)
			return err
		}
		check, note = "app_plain", "plain INSERT"
	case ScenarioTxEnqueue:
		pg, ok := s.st.(*postgres.Store)
		if !ok {
			return nil, Unsupported("same-database enqueue needs the Postgres store")
		}
		same, err := outbox.NewSameDB(eng, pg)
		if err != nil {
			return nil, err
		}
		enqueue = func(ctx context.Context, tx pgx.Tx, i int) error {
			_, err := noopDef.EnqueueTx(ctx, same.Tx(tx), i)
			return err
		}
		check, note = "jobs.runs", "EnqueueTx (outbox.SameDB)"
	case ScenarioTxStage:
		obs, err := outbox.NewPostgresStore(pool, "app_outbox")
		if err != nil {
			return nil, err
		}
		if err := obs.Migrate(ctx); err != nil {
			return nil, err
		}
		ob, err := outbox.New(outbox.Config{Store: obs, Mode: outbox.Required})
		if err != nil {
			return nil, err
		}
		enqueue = func(ctx context.Context, tx pgx.Tx, i int) error {
			_, err := noopDef.EnqueueTx(ctx, ob.Tx(outbox.Pgx(tx)), i)
			return err
		}
		check, note = "app_outbox", "EnqueueTx (outbox staging)"
	default:
		return nil, fmt.Errorf("unknown scenario %q", scenario)
	}
	runtime.GC()
	return func(ctx context.Context) (Result, error) {
		_, err := ClosedLoop(ctx, n, concurrency, func(ctx context.Context, i int) error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO app_orders (id, total) VALUES ($1, $2)`, i, i*100); err != nil {
					return err
				}
				return enqueue(ctx, tx, i)
			})
		})
		if err != nil {
			return Result{}, err
		}
		orders, err := countRows(ctx, pool, "app_orders")
		if err != nil {
			return Result{}, err
		}
		rows, err := countRows(ctx, pool, check)
		if err != nil {
			return Result{}, err
		}
		if rows != orders {
			return Result{}, fmt.Errorf("%d orders but %d rows in %s", orders, rows, check)
		}
		return Result{Units: orders, Backend: s.backend, Note: note}, nil
	}, nil
}

func (s *jobsSystem) Relay(ctx context.Context, n int) (Measure, error) {
	// Stage the backlog on a pool of its own, closed (and its statistics flushed) before the
	// measured window opens.
	stagePool, err := s.appPool(ctx, 4)
	if err != nil {
		return nil, err
	}
	obs, err := outbox.NewPostgresStore(stagePool, "app_outbox")
	if err != nil {
		return nil, err
	}
	if err := obs.Migrate(ctx); err != nil {
		return nil, err
	}
	ob, err := outbox.New(outbox.Config{Store: obs, Mode: outbox.Required})
	if err != nil {
		return nil, err
	}
	for from := 0; from < n; from += 1000 {
		if err := pgx.BeginFunc(ctx, stagePool, func(tx pgx.Tx) error {
			for i := from; i < min(from+1000, n); i++ {
				if _, err := noopDef.EnqueueTx(ctx, ob.Tx(outbox.Pgx(tx)), i); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("stage: %w", err)
		}
	}
	stagePool.Close()
	time.Sleep(time.Second)

	pool, err := s.appPool(ctx, 4)
	if err != nil {
		return nil, err
	}
	if obs, err = outbox.NewPostgresStore(pool, "app_outbox"); err != nil {
		return nil, err
	}
	eng, err := s.sideEngine()
	if err != nil {
		return nil, err
	}
	relay, err := outbox.NewRelay(outbox.RelayConfig{Store: obs, Publisher: eng,
		Logger: quietLogger()})
	if err != nil {
		return nil, err
	}
	runtime.GC()
	return func(ctx context.Context) (Result, error) {
		done := 0
		for done < n {
			k, err := relay.Pass(ctx)
			if err != nil {
				return Result{}, err
			}
			if k == 0 {
				return Result{}, fmt.Errorf("a pass published nothing after %d of %d rows", done, n)
			}
			done += k
		}
		runs, err := countRows(ctx, pool, "jobs.runs")
		if err != nil {
			return Result{}, err
		}
		if runs != n {
			return Result{}, fmt.Errorf("%d rows published but %d runs", done, runs)
		}
		return Result{Units: runs, Backend: s.backend, Note: fmt.Sprintf("one relay, batches of %d", outbox.DefaultBatch)}, nil
	}, nil
}
