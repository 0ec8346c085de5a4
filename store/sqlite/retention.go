package sqlite

import (
	"context"
	"slices"

	"github.com/ultimat3/jobs/store"
)

// retentionArgs are ?1…?5 of sqlRetentionEligible.
func retentionArgs(p store.RetentionParams) []any {
	latest := p.CompletedBefore
	for _, t := range []store.State{store.StateFailed, store.StateCancelled} {
		if p.Before(t).After(latest) {
			latest = p.Before(t)
		}
	}
	return []any{encTime(latest), encTime(p.CompletedBefore), encTime(p.FailedBefore),
		encTime(p.CancelledBefore), encTime(p.DedupeFrom)}
}

// RetentionCandidates implements store.Retention.
func (s *Store) RetentionCandidates(ctx context.Context, p store.RetentionParams) ([]store.Run, error) {
	rows, err := s.readQuery(ctx, sqlRetentionCandidates, append(retentionArgs(p), store.RetentionLimit(p.Limit))...)
	if err != nil {
		return nil, failed("retention candidates", err)
	}
	out, err := collect(rows, scanRuns)
	if err != nil {
		return nil, failed("retention candidates", err)
	}
	return out, nil
}

// RetentionDelete implements store.Retention. SQLite has one writer, so the batch is one short
// write transaction: a bounded number of runs, each deleted by primary key or an index. Nothing
// can change a run between the check and its delete.
func (s *Store) RetentionDelete(ctx context.Context, p store.RetentionParams, ids []string) (store.RetentionDeleted, error) {
	var out store.RetentionDeleted
	ids = ids[:min(len(ids), store.RetentionLimit(p.Limit))]
	args := retentionArgs(p)
	err := s.write(ctx, "retention delete", func(t *wtx) error {
		out = store.RetentionDeleted{}
		for i, id := range ids {
			if slices.Contains(ids[:i], id) {
				continue
			}
			var n int
			if err := t.queryRow(sqlRetentionCheck, append(slices.Clone(args), id)...).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				continue
			}
			res, err := t.exec(sqlRetentionHistory, id)
			if err != nil {
				return err
			}
			evs, err := res.RowsAffected()
			if err != nil {
				return err
			}
			// One call per statement (not a loop over them): each is named where it runs, as
			// TestWriteStatementsArePrepared checks.
			if _, err := t.exec(sqlRetentionTimers, id); err != nil {
				return err
			}
			if _, err := t.exec(sqlRetentionWaits, id); err != nil {
				return err
			}
			if _, err := t.exec(sqlRetentionDeliveries, id); err != nil {
				return err
			}
			if _, err := t.exec(sqlRetentionDedupe, id); err != nil {
				return err
			}
			if _, err := t.exec(sqlRetentionChildLink, id); err != nil {
				return err
			}
			if _, err := t.exec(sqlRetentionRun, id); err != nil {
				return err
			}
			out.Runs = append(out.Runs, id)
			out.Events += evs
		}
		return nil
	})
	return out, err
}
