package sqlite

import (
	"context"
	"database/sql"
	"sort"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// WorkerRelease implements store.Workers in one write transaction.
func (s *Store) WorkerRelease(ctx context.Context, workerID string, now time.Time) ([]store.Woken, error) {
	if workerID == "" {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "release of a worker needs its id")
	}
	now = normTime(now)
	var out []store.Woken
	err := s.write(ctx, "release worker", func(t *wtx) error {
		out = nil
		rows, err := t.query(sqlWorkerReleaseClaims, nameArgs("zero", int64(minTime), "now", encTime(now), "worker", workerID)...)
		if err != nil {
			return err
		}
		claims, err := collect(rows, func(rows *sql.Rows) (store.Woken, error) {
			w := store.Woken{Reclaimed: true}
			return w, rows.Scan(&w.RunID, &w.Queue)
		})
		if err != nil {
			return err
		}
		out = append(out, claims...)
		rows, err = t.query(sqlWorkerReleaseSticky, nameArgs("worker", workerID)...)
		if err != nil {
			return err
		}
		type sticky struct {
			w     store.Woken
			state string
		}
		held, err := collect(rows, func(rows *sql.Rows) (sticky, error) {
			var x sticky
			return x, rows.Scan(&x.w.RunID, &x.w.Queue, &x.state)
		})
		if err != nil {
			return err
		}
		for _, x := range held {
			if x.state == string(store.StateReady) {
				out = append(out, x.w)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RunID < out[j].RunID })
	return out, nil
}
