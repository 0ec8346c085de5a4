package memory

import (
	"context"
	"sort"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// backfillLedger is the backfill ledger: rows by run id. It lives under the store's one mutex
// like everything else here.
type backfillLedger struct {
	rows map[string]*store.Backfill
}

// BackfillOpen implements store.Backfills.
func (s *Store) BackfillOpen(ctx context.Context, b store.Backfill) (store.Backfill, bool, error) {
	if err := s.lock(ctx); err != nil {
		return store.Backfill{}, false, err
	}
	defer s.mu.Unlock()
	if s.ledger.rows == nil {
		s.ledger.rows = map[string]*store.Backfill{}
	}
	if row, ok := s.ledger.rows[b.RunID]; ok {
		if row.Status != store.BackfillCompleted {
			row.Status = store.BackfillRunning
			row.Error = ""
			row.UpdatedAt = b.UpdatedAt
			if b.Total >= 0 {
				row.Total = b.Total
			}
		}
		return *row, true, nil
	}
	row := b
	row.Status = store.BackfillRunning
	s.ledger.rows[b.RunID] = &row
	return row, false, nil
}

// BackfillUpdate implements store.Backfills.
func (s *Store) BackfillUpdate(ctx context.Context, p store.BackfillProgress) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	row, ok := s.ledger.rows[p.RunID]
	if !ok || row.Status != store.BackfillRunning || (p.Batches < row.Batches && !p.Rewind) {
		return nil
	}
	row.Rows, row.Batches, row.Cursor, row.UpdatedAt = p.Rows, p.Batches, p.Cursor, p.Now
	return nil
}

// BackfillFinish implements store.Backfills.
func (s *Store) BackfillFinish(ctx context.Context, p store.BackfillFinish) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	row, ok := s.ledger.rows[p.RunID]
	if !ok || row.Status == store.BackfillCompleted {
		return nil
	}
	if p.Batches >= row.Batches {
		row.Rows, row.Batches, row.Cursor = p.Rows, p.Batches, p.Cursor
	}
	row.Status, row.Error, row.UpdatedAt = p.Status, p.Error, p.Now
	if p.Status == store.BackfillCompleted {
		row.CompletedAt = p.Now
	}
	return nil
}

// BackfillList implements store.Backfills.
func (s *Store) BackfillList(ctx context.Context, f store.BackfillFilter) ([]store.Backfill, error) {
	switch f.Newest {
	case "", store.NewestPerTenant, store.NewestPerName:
	default:
		return nil, jobs.Errorf(jobs.CodeBadRequest, "backfill list: newest %q: want %q or %q", f.Newest, store.NewestPerTenant, store.NewestPerName)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []store.Backfill
	for _, row := range s.ledger.rows {
		if (f.Name != "" && row.Name != f.Name) || (f.Status != "" && row.Status != f.Status) ||
			(f.RunID != "" && row.RunID != f.RunID) || !tenantSelected(f, row.Tenant) {
			continue
		}
		out = append(out, *row)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.After(out[j].StartedAt)
		}
		return out[i].RunID > out[j].RunID
	})
	if f.Newest != "" {
		type scope struct{ name, tenant string }
		seen := map[scope]bool{}
		kept := out[:0]
		for _, row := range out {
			k := scope{row.Name, row.Tenant}
			if f.Newest == store.NewestPerName {
				k.tenant = ""
			}
			if !seen[k] {
				seen[k] = true
				kept = append(kept, row)
			}
		}
		out = kept
	}
	if limit := store.BackfillLimit(f.Limit); len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// tenantSelected reports whether f selects a row of tenant (store.BackfillFilter: Tenant, else
// NoTenant, else every tenant).
func tenantSelected(f store.BackfillFilter, tenant string) bool {
	switch {
	case f.Tenant != "":
		return tenant == f.Tenant
	case f.NoTenant:
		return tenant == ""
	}
	return true
}
