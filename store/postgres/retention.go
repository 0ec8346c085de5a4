package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs/store"
)

// retentionArgs are $1…$5 of sqlRetentionEligible.
func retentionArgs(p store.RetentionParams) []any {
	latest := p.CompletedBefore
	for _, t := range []time.Time{p.FailedBefore, p.CancelledBefore} {
		if t.After(latest) {
			latest = t
		}
	}
	return []any{latest, p.CompletedBefore, p.FailedBefore, p.CancelledBefore, p.DedupeFrom}
}

// RetentionCandidates implements store.Retention.
func (s *Store) RetentionCandidates(ctx context.Context, p store.RetentionParams) ([]store.Run, error) {
	rows, err := s.pool.Query(ctx, s.render(sqlRetentionCandidates), append(retentionArgs(p), store.RetentionLimit(p.Limit))...)
	if err != nil {
		return nil, unavailable("retention candidates", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Run, error) { return scanRun(row) })
	if err != nil {
		return nil, unavailable("retention candidates", err)
	}
	return out, nil
}

// RetentionDelete implements store.Retention in one statement (sqlRetentionDelete).
func (s *Store) RetentionDelete(ctx context.Context, p store.RetentionParams, ids []string) (store.RetentionDeleted, error) {
	ids = ids[:min(len(ids), store.RetentionLimit(p.Limit))]
	if len(ids) == 0 {
		return store.RetentionDeleted{}, nil
	}
	var out store.RetentionDeleted
	err := s.pool.QueryRow(ctx, s.render(sqlRetentionDelete), append(retentionArgs(p), ids)...).Scan(&out.Runs, &out.Events)
	if err != nil {
		return store.RetentionDeleted{}, unavailable("retention delete", err)
	}
	if len(out.Runs) == 0 {
		out.Runs = nil
	}
	return out, nil
}
