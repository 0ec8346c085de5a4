package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

func scanBackfill(row pgx.Row, extra ...any) (store.Backfill, error) {
	var b store.Backfill
	var completed *time.Time
	dest := append([]any{&b.RunID, &b.Name, &b.Checksum, &b.Status, &b.AppVersion, &b.Rows, &b.Batches,
		&b.Cursor, &b.Total, &b.Error, &b.StartedAt, &b.UpdatedAt, &completed, &b.Tenant}, extra...)
	if err := row.Scan(dest...); err != nil {
		return b, err
	}
	b.StartedAt, b.UpdatedAt = b.StartedAt.UTC(), b.UpdatedAt.UTC()
	if completed != nil {
		b.CompletedAt = completed.UTC()
	}
	return b, nil
}

// BackfillOpen implements store.Backfills in one statement.
func (s *Store) BackfillOpen(ctx context.Context, b store.Backfill) (store.Backfill, bool, error) {
	var adopted bool
	row, err := scanBackfill(s.pool.QueryRow(ctx, s.bq(sqlBackfillOpen), b.RunID, b.Name, b.Checksum, b.AppVersion,
		b.Rows, b.Batches, b.Cursor, b.Total, b.StartedAt, b.UpdatedAt, b.Tenant), &adopted)
	if err != nil {
		return store.Backfill{}, false, unavailable("backfill open", err)
	}
	return row, adopted, nil
}

// BackfillUpdate implements store.Backfills.
func (s *Store) BackfillUpdate(ctx context.Context, p store.BackfillProgress) error {
	if _, err := s.pool.Exec(ctx, s.bq(sqlBackfillUpdate), p.RunID, p.Rows, p.Batches, p.Cursor, p.Now, p.Rewind); err != nil {
		return unavailable("backfill update", err)
	}
	return nil
}

// BackfillFinish implements store.Backfills.
func (s *Store) BackfillFinish(ctx context.Context, p store.BackfillFinish) error {
	if _, err := s.pool.Exec(ctx, s.bq(sqlBackfillFinish), p.RunID, p.Rows, p.Batches, p.Cursor, p.Status, p.Error, p.Now); err != nil {
		return unavailable("backfill finish", err)
	}
	return nil
}

// BackfillList implements store.Backfills.
func (s *Store) BackfillList(ctx context.Context, f store.BackfillFilter) ([]store.Backfill, error) {
	args := []any{f.Name, f.Status, f.RunID, store.BackfillLimit(f.Limit), f.Tenant, f.NoTenant}
	q := sqlBackfillList
	switch f.Newest {
	case "":
	case store.NewestPerTenant, store.NewestPerName:
		q, args = sqlBackfillListNewest, append(args, f.Newest == store.NewestPerName)
	default:
		return nil, jobs.Errorf(jobs.CodeBadRequest, "backfill list: newest %q: want %q or %q", f.Newest, store.NewestPerTenant, store.NewestPerName)
	}
	rows, err := s.pool.Query(ctx, s.bq(q), args...)
	if err != nil {
		return nil, unavailable("backfill list", err)
	}
	defer rows.Close()
	var out []store.Backfill
	for rows.Next() {
		b, err := scanBackfill(rows)
		if err != nil {
			return nil, unavailable("backfill list", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("backfill list", err)
	}
	return out, nil
}
