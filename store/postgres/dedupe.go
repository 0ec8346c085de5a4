package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// RunCreateOnce implements store.Deduper: the id is claimed first (a concurrent claim of the same
// id waits for ours), then the run is created in the same transaction, and the id is pointed at
// whichever run the create returned.
func (s *Store) RunCreateOnce(ctx context.Context, p store.OnceParams) (store.CreateRunResult, error) {
	t, err := s.begin(ctx, "run create once")
	if err != nil {
		return store.CreateRunResult{}, err
	}
	defer t.release()
	res, err := s.createOnce(ctx, t, p)
	if err != nil {
		return store.CreateRunResult{}, err
	}
	res.Run = cloneRun(res.Run)
	return res, nil
}

// createOnce is RunCreateOnce inside t, committed (or, in a caller's transaction, written).
func (s *Store) createOnce(ctx context.Context, t *txn, p store.OnceParams) (store.CreateRunResult, error) {
	if p.ID == "" {
		return store.CreateRunResult{}, jobs.Errorf(jobs.CodeInvariant, "create once: no dedupe id")
	}
	if err := checkCreate(p.Create); err != nil {
		return store.CreateRunResult{}, err
	}
	claimed := false
	var holder string
	b := t.batch()
	b.Queue(s.render(sqlDedupeClaim), p.ID, p.Create.Run.ID, p.Create.Run.CreatedAt).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			claimed = true
		}
		return rows.Err()
	})
	b.Queue(s.render(sqlDedupeGet), p.ID).QueryRow(func(row pgx.Row) error { return row.Scan(&holder) })
	if err := t.send(ctx, b); err != nil {
		return store.CreateRunResult{}, err
	}
	if !claimed {
		var run store.Run
		b := t.batch()
		b.Queue(s.q(stmtRunGet), holder).QueryRow(func(row pgx.Row) error {
			var err error
			run, err = scanRun(row)
			return err
		})
		if err := t.commit(ctx, b); err != nil {
			return store.CreateRunResult{}, err
		}
		return store.CreateRunResult{Run: run, Deduped: true}, nil
	}
	out, b, err := s.createRuns(ctx, t, []store.CreateRunParams{p.Create})
	if err != nil {
		return store.CreateRunResult{}, err
	}
	if out[0].Run.ID != p.Create.Run.ID {
		b.Queue(s.render(sqlDedupeSet), p.ID, out[0].Run.ID)
	}
	if err := t.commit(ctx, b); err != nil {
		return store.CreateRunResult{}, err
	}
	return out[0], nil
}

// checkCreate refuses params no create may write: the engine's bugs, not a caller's.
func checkCreate(p store.CreateRunParams) error {
	if p.Run.ID == "" {
		return jobs.Errorf(jobs.CodeInvariant, "create run: no id")
	}
	if p.Run.State != store.StateReady && p.Run.State != store.StateDelayed {
		return jobs.Errorf(jobs.CodeInvariant, "create run %s in state %q: want ready or delayed", p.Run.ID, p.Run.State)
	}
	return nil
}

// DedupePrune implements store.Deduper.
func (s *Store) DedupePrune(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, s.render(sqlDedupePrune), before)
	if err != nil {
		return 0, unavailable("dedupe prune", err)
	}
	return int(tag.RowsAffected()), nil
}
