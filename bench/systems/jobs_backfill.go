package systems

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/backfill/keyset"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// Section 8: a backfill pass, by default and with OverlapCheckpoints, against the loop a person
// would write by hand, on one Postgres table; and the resume of a pass whose history holds many completed pages.

var _ Backfiller = (*jobsSystem)(nil)

// benchBatch is the page size of both sweeps: the backfill's default.
const benchBatch = backfill.DefaultBatch

// Both sweeps make the same two statements a page: the keyset SELECT the source builds, and one
// UPDATE of the page's ids.
const (
	sqlPage   = `SELECT id FROM bf_items WHERE id > $1 ORDER BY id LIMIT $2`
	sqlUpdate = `UPDATE bf_items SET swept = true WHERE id = ANY($1)`
)

// appTable creates and fills the application table (in the run's database, public schema) and
// returns a pool on it.
func (s *jobsSystem) appTable(ctx context.Context, rows int) (*pgxpool.Pool, error) {
	if s.backend != "postgres" {
		return nil, Unsupported("the backfill scenarios run on Postgres")
	}
	pool, err := pgxpool.New(ctx, s.dbURL)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, pool.Close)
	for _, q := range []string{
		`DROP TABLE IF EXISTS bf_items`,
		`CREATE TABLE bf_items (id bigint PRIMARY KEY, payload text NOT NULL, swept boolean NOT NULL DEFAULT false)`,
		fmt.Sprintf(`INSERT INTO bf_items (id, payload) SELECT g, md5(g::text) FROM generate_series(1, %d) g`, rows),
		`VACUUM ANALYZE bf_items`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return nil, err
		}
	}
	return pool, nil
}

func sweptCount(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var n int
	err := pool.QueryRow(ctx, `SELECT count(*) FROM bf_items WHERE swept`).Scan(&n)
	return n, err
}

func (s *jobsSystem) BackfillPass(ctx context.Context, rows int) (Measure, error) {
	return s.backfillPass(ctx, rows, false)
}

func (s *jobsSystem) BackfillOverlap(ctx context.Context, rows int) (Measure, error) {
	return s.backfillPass(ctx, rows, true)
}

// backfillPass is the pass both scenarios time; overlap adds backfill.OverlapCheckpoints and
// changes nothing else, so the two rows differ by that option alone.
func (s *jobsSystem) backfillPass(ctx context.Context, rows int, overlap bool) (Measure, error) {
	pool, err := s.appTable(ctx, rows)
	if err != nil {
		return nil, err
	}
	src := keyset.Pgx(pool, keyset.Query{Table: "bf_items", Columns: []string{"id"}, Keys: []string{"id"}},
		func(scan func(...any) error) (int64, error) {
			var id int64
			return id, scan(&id)
		}, func(id int64) backfill.Cursor { return backfill.Cursor{id} })
	opts := []backfill.Option{backfill.BatchSize(benchBatch), backfill.Rate(1e6)}
	note := fmt.Sprintf("pages of %d, rate 1e6/s", benchBatch)
	if overlap {
		opts = append(opts, backfill.OverlapCheckpoints())
		note += ", OverlapCheckpoints"
	}
	b := backfill.MustDefine("bench-sweep", backfill.AllTenants(), src, func(ctx context.Context, bt backfill.Batch[int64]) error {
		_, err := pool.Exec(ctx, sqlUpdate, bt.Rows)
		return err
	}, opts...)
	// The worker is a long-lived process that is already up when someone enqueues a pass, as
	// the loop's process is: starting it is preparation, not the sweep. The clock covers the
	// enqueue, the claim, every page and the completion.
	if err := s.startWorker(ctx, b, 1); err != nil {
		return nil, err
	}
	runtime.GC()
	return func(ctx context.Context) (Result, error) {
		if _, err := b.Enqueue(ctx, s.eng, backfill.Input{}); err != nil {
			return Result{}, err
		}
		for s.completed.Load() < 1 {
			if ctx.Err() != nil {
				return Result{}, fmt.Errorf("the pass did not complete: %w", ctx.Err())
			}
			time.Sleep(200 * time.Microsecond)
		}
		n, err := sweptCount(ctx, pool)
		if err != nil {
			return Result{}, err
		}
		return Result{Units: n, Steps: int(s.steps.Load()), Backend: s.backend, Note: note}, nil
	}, nil
}

func (s *jobsSystem) BackfillLoop(ctx context.Context, rows int) (Measure, error) {
	pool, err := s.appTable(ctx, rows)
	if err != nil {
		return nil, err
	}
	runtime.GC()
	return func(ctx context.Context) (Result, error) {
		after := int64(0)
		for {
			rs, err := pool.Query(ctx, sqlPage, after, benchBatch)
			if err != nil {
				return Result{}, err
			}
			var ids []int64
			for rs.Next() {
				var id int64
				if err := rs.Scan(&id); err != nil {
					rs.Close()
					return Result{}, err
				}
				ids = append(ids, id)
			}
			rs.Close()
			if err := rs.Err(); err != nil {
				return Result{}, err
			}
			if len(ids) == 0 {
				break
			}
			if _, err := pool.Exec(ctx, sqlUpdate, ids); err != nil {
				return Result{}, err
			}
			after = ids[len(ids)-1]
			if len(ids) < benchBatch {
				break
			}
		}
		n, err := sweptCount(ctx, pool)
		if err != nil {
			return Result{}, err
		}
		return Result{Units: n, Backend: s.backend, Note: fmt.Sprintf("pages of %d", benchBatch)}, nil
	}, nil
}

func (s *jobsSystem) BackfillResume(ctx context.Context, pages int) (Measure, error) {
	// The table is empty: the resumed pass replays its pages, then reads one empty page.
	pool, err := s.appTable(ctx, 0)
	if err != nil {
		return nil, err
	}
	var live atomic.Int64
	src := keyset.Pgx(pool, keyset.Query{Table: "bf_items", Columns: []string{"id"}, Keys: []string{"id"}},
		func(scan func(...any) error) (int64, error) {
			var id int64
			return id, scan(&id)
		}, func(id int64) backfill.Cursor { return backfill.Cursor{id} })
	b := backfill.MustDefine("bench-resume", backfill.AllTenants(), src, func(context.Context, backfill.Batch[int64]) error {
		live.Add(1)
		return nil
	}, backfill.BatchSize(1), backfill.Rate(1e6))

	now := time.Now().UTC()
	in, err := jobs.Encode(backfill.Input{})
	if err != nil {
		return nil, err
	}
	id := fmt.Sprintf("bf-resume-%d", now.UnixNano())
	run := store.Run{ID: id, Job: b.Name(), Queue: jobs.DefaultQueue, Key: b.Name(), NoTenant: true,
		Input: in, State: store.StateReady, Attempt: 1, ReadyAt: now, CreatedAt: now, UpdatedAt: now}
	started := history.New(now, history.RunStarted{Job: run.Job, Queue: run.Queue, Input: in, Key: run.Key, NoTenant: true})
	if _, err := s.st.RunCreate(ctx, []store.CreateRunParams{{Run: run, Started: started}}); err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	claimed, err := s.st.RunClaim(ctx, store.ClaimParams{WorkerID: "bench-preload", Queues: []string{run.Queue},
		Limit: 1, Now: now, LeaseUntil: now.Add(time.Hour), StickyBefore: now})
	if err != nil || len(claimed) != 1 {
		return nil, fmt.Errorf("claim: %d runs, %v", len(claimed), err)
	}
	fence := claimed[0].Fence
	apply := func(m store.Mutation) error {
		res, err := s.st.RunApply(ctx, []store.Mutation{m})
		if err == nil && len(res) == 1 {
			err = res[0].Err
		}
		return err
	}
	// Page i recorded its checkpoint: the cursor after row i+1, i+1 rows so far.
	for from := 0; from < pages; from += resumeBatch {
		var batch []history.Event
		for i := from; i < min(from+resumeBatch, pages); i++ {
			out, err := jobs.Encode(backfill.Checkpoint{Cursor: backfill.Cursor{int64(i + 1)}, Rows: int64(i + 1)})
			if err != nil {
				return nil, err
			}
			batch = append(batch, history.New(now, history.StepCompleted{StepName: fmt.Sprintf("batch:%d", i), Output: out}))
		}
		if err := apply(store.Mutation{RunID: id, Fence: fence, Now: time.Now().UTC(), Events: batch}); err != nil {
			return nil, fmt.Errorf("append history: %w", err)
		}
	}
	t := time.Now().UTC()
	if err := apply(store.Mutation{RunID: id, Fence: fence, Now: t,
		Transition: store.Transition{State: store.StateReady, ReadyAt: t}}); err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	runtime.GC()

	return func(ctx context.Context) (Result, error) {
		if err := s.startWorker(ctx, b, 1); err != nil {
			return Result{}, err
		}
		for s.completed.Load() < 1 {
			if ctx.Err() != nil {
				return Result{}, fmt.Errorf("the pass did not complete: %w", ctx.Err())
			}
			time.Sleep(100 * time.Microsecond)
		}
		if live.Load() != 0 || s.steps.Load() != 1 {
			return Result{}, fmt.Errorf("%d pages handled live, %d steps recorded: want 0 and the final empty page", live.Load(), s.steps.Load())
		}
		r, err := s.st.RunGet(ctx, id)
		if err != nil {
			return Result{}, err
		}
		res, err := b.Result(r.Result)
		if err != nil {
			return Result{}, err
		}
		if res.Batches != int64(pages+1) || res.Rows != int64(pages) {
			return Result{}, fmt.Errorf("result %+v: want %d pages replayed", res, pages)
		}
		return Result{Units: pages, Events: pages, Backend: s.backend, HistoryRead: time.Duration(s.historyRead.Load())}, nil
	}, nil
}
