package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

func scanBackfill(sc interface{ Scan(...any) error }) (store.Backfill, error) {
	var b store.Backfill
	var started, updated, completed int64
	err := sc.Scan(&b.RunID, &b.Name, &b.Checksum, &b.Status, &b.AppVersion, &b.Rows, &b.Batches, &b.Cursor,
		&b.Total, &b.Error, &started, &updated, &completed, &b.Tenant)
	b.StartedAt, b.UpdatedAt, b.CompletedAt = decTime(started), decTime(updated), decTime(completed)
	return b, err
}

// BackfillOpen implements store.Backfills.
func (s *Store) BackfillOpen(ctx context.Context, b store.Backfill) (store.Backfill, bool, error) {
	var row store.Backfill
	var adopted bool
	err := s.write(ctx, "backfill open", func(t *wtx) error {
		if _, err := t.exec(sqlBackfillAdopt, encTime(b.UpdatedAt), b.RunID, b.Total); err != nil {
			return err
		}
		got, err := scanBackfill(t.queryRow(sqlBackfillGet, b.RunID))
		if err == nil {
			row, adopted = got, true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if _, err := t.exec(sqlBackfillInsert, b.RunID, b.Name, b.Checksum, b.AppVersion, b.Rows, b.Batches,
			b.Cursor, b.Total, encTime(b.StartedAt), encTime(b.UpdatedAt), encTime(b.CompletedAt), b.Tenant); err != nil {
			return err
		}
		row, err = scanBackfill(t.queryRow(sqlBackfillGet, b.RunID))
		return err
	})
	return row, adopted, err
}

// BackfillUpdate implements store.Backfills.
func (s *Store) BackfillUpdate(ctx context.Context, p store.BackfillProgress) error {
	return s.write(ctx, "backfill update", func(t *wtx) error {
		rewind := 0
		if p.Rewind {
			rewind = 1
		}
		_, err := t.exec(sqlBackfillUpdate, p.Rows, p.Batches, p.Cursor, encTime(p.Now), p.RunID, rewind)
		return err
	})
}

// BackfillFinish implements store.Backfills.
func (s *Store) BackfillFinish(ctx context.Context, p store.BackfillFinish) error {
	return s.write(ctx, "backfill finish", func(t *wtx) error {
		_, err := t.exec(sqlBackfillFinish, p.Rows, p.Batches, p.Cursor, p.Status, p.Error, encTime(p.Now), p.RunID)
		return err
	})
}

// BackfillList implements store.Backfills.
func (s *Store) BackfillList(ctx context.Context, f store.BackfillFilter) ([]store.Backfill, error) {
	noTenant := 0
	if f.NoTenant {
		noTenant = 1
	}
	q, perName := sqlBackfillList, 0
	switch f.Newest {
	case "":
	case store.NewestPerTenant:
		q = sqlBackfillListNewest
	case store.NewestPerName:
		q, perName = sqlBackfillListNewest, 1
	default:
		return nil, badNewest(f.Newest)
	}
	args := []any{f.Name, f.Status, f.RunID, store.BackfillLimit(f.Limit), f.Tenant, noTenant}
	if q == sqlBackfillListNewest {
		args = append(args, perName)
	}
	rows, err := s.readQuery(ctx, q, args...)
	if err != nil {
		return nil, failed("backfill list", err)
	}
	out, err := collect(rows, func(r *sql.Rows) (store.Backfill, error) { return scanBackfill(r) })
	if err != nil {
		return nil, failed("backfill list", err)
	}
	return out, nil
}

func badNewest(v string) error {
	return jobs.Errorf(jobs.CodeBadRequest, "backfill list: newest %q: want %q or %q", v, store.NewestPerTenant, store.NewestPerName)
}
