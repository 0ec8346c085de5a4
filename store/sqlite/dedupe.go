package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	jobs "github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// RunCreateOnce implements store.Deduper. SQLite has one writer, so the lookup, the create and
// the record share a write transaction nobody else can slip into.
func (s *Store) RunCreateOnce(ctx context.Context, p store.OnceParams) (store.CreateRunResult, error) {
	if p.ID == "" {
		return store.CreateRunResult{}, jobs.Errorf(jobs.CodeInvariant, "create once: no dedupe id")
	}
	var out store.CreateRunResult
	err := s.write(ctx, "create run once", func(t *wtx) error {
		var runID string
		err := t.queryRow(sqlDedupeGet, p.ID).Scan(&runID)
		switch {
		case err == nil:
			r, ok, err := t.getRun(runID)
			if err != nil {
				return err
			}
			if ok {
				out = store.CreateRunResult{Run: r, Deduped: true}
				return nil
			}
			return jobs.Errorf(jobs.CodeInvariant, "create once: dedupe id %q names run %s, which does not exist", p.ID, runID)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		res := make([]store.CreateRunResult, 1)
		if err := t.createRuns([]store.CreateRunParams{p.Create}, res); err != nil {
			return err
		}
		out = res[0]
		_, err = t.exec(sqlDedupeInsert, p.ID, out.Run.ID, encTime(p.Create.Run.CreatedAt))
		return err
	})
	return out, err
}

// DedupePrune implements store.Deduper.
func (s *Store) DedupePrune(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.write(ctx, "dedupe prune", func(t *wtx) error {
		res, err := t.exec(sqlDedupePrune, encTime(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
