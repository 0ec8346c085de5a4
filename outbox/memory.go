package outbox

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ultimat3/jobs"
)

// MemoryStore is an outbox Store in memory, for tests and development. Its transactions
// (Begin) stage rows that become visible at Commit and vanish at Rollback. A published row is
// dropped, so Backlog is the relay's backlog, not a running total; the SQL stores keep
// published_at instead. A failed row is kept, as in the SQL stores, until requeued or dropped.
type MemoryStore struct {
	mu   sync.Mutex
	rows map[string]*Row
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore { return &MemoryStore{rows: map[string]*Row{}} }

// MemTx is a transaction of a MemoryStore.
type MemTx struct {
	s      *MemoryStore
	mu     sync.Mutex
	staged []Row
	done   bool
}

// Begin opens a transaction to stage into.
func (s *MemoryStore) Begin() *MemTx { return &MemTx{s: s} }

func (t *MemTx) exec(context.Context, string, ...any) error {
	return jobs.Errorf(jobs.CodeInvariant, "outbox: a memory transaction runs no SQL")
}

// Commit makes the staged rows visible to relays.
func (t *MemTx) Commit() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return jobs.Errorf(jobs.CodeInvariant, "outbox: transaction already ended")
	}
	t.done = true
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for _, r := range t.staged {
		r := r
		t.s.rows[r.ID] = &r
	}
	return nil
}

// Rollback drops the staged rows.
func (t *MemTx) Rollback() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done, t.staged = true, nil
	return nil
}

// Stage implements Store; tx must be one of this store's.
func (s *MemoryStore) Stage(_ context.Context, tx Tx, rows []Row) error {
	t, ok := tx.(*MemTx)
	if !ok || t == nil || t.s != s {
		return jobs.Errorf(jobs.CodeOutboxNoTx, "outbox: the memory outbox stages only into its own transactions (Begin), not a %T", tx)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return jobs.Errorf(jobs.CodeOutboxNoTx, "outbox: the transaction already ended")
	}
	t.staged = append(t.staged, rows...)
	return nil
}

func (s *MemoryStore) ordered() []*Row {
	out := make([]*Row, 0, len(s.rows))
	for _, r := range s.rows {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *Row) int {
		if c := a.StagedAt.Compare(b.StagedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Claim implements Store.
func (s *MemoryStore) Claim(_ context.Context, relay string, now time.Time, lease time.Duration, limit int) ([]Row, error) {
	if relay == "" || lease <= 0 || limit <= 0 {
		return nil, jobs.Errorf(jobs.CodeInvariant, "outbox claim: relay %q, lease %s, limit %d", relay, lease, limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lapse := now.Add(-lease)
	var out []Row
	for _, r := range s.ordered() {
		if len(out) == limit {
			break
		}
		if !r.FailedAt.IsZero() {
			continue // set aside: out of line
		}
		if r.ClaimedBy != "" && r.ClaimedAt.After(lapse) {
			break // held elsewhere: nothing behind it may overtake it
		}
		r.ClaimedBy, r.ClaimedAt = relay, now
		out = append(out, *r)
	}
	return out, nil
}

// MarkPublished implements Store: the rows are dropped.
func (s *MemoryStore) MarkPublished(_ context.Context, relay string, ids []string, _ time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, id := range ids {
		if r := s.rows[id]; r != nil && r.ClaimedBy == relay && r.FailedAt.IsZero() {
			delete(s.rows, id)
			n++
		}
	}
	return n, nil
}

// MarkFailed implements Store.
func (s *MemoryStore) MarkFailed(_ context.Context, relay, id string, code jobs.Code, message string, now time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows[id]
	if r == nil || r.ClaimedBy != relay || !r.FailedAt.IsZero() {
		return false, nil
	}
	r.FailedAt, r.ErrorCode, r.ErrorMessage = now, code, message
	return true, nil
}

// Release implements Store.
func (s *MemoryStore) Release(_ context.Context, relay string, ids []string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, id := range ids {
		if r := s.rows[id]; r != nil && r.ClaimedBy == relay && r.FailedAt.IsZero() {
			r.ClaimedBy, r.ClaimedAt = "", time.Time{}
			n++
		}
	}
	return n, nil
}

// Backlog implements Store.
func (s *MemoryStore) Backlog(context.Context) (int, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	var oldest time.Time
	for _, r := range s.rows {
		if !r.FailedAt.IsZero() {
			continue
		}
		n++
		if oldest.IsZero() || r.StagedAt.Before(oldest) {
			oldest = r.StagedAt
		}
	}
	return n, oldest, nil
}

// Failed implements Store.
func (s *MemoryStore) Failed(_ context.Context, limit int) ([]Row, int, error) {
	if limit < 0 {
		return nil, 0, jobs.Errorf(jobs.CodeBadRequest, "outbox failed rows: limit %d", limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Row
	total := 0
	for _, r := range s.ordered() {
		if r.FailedAt.IsZero() {
			continue
		}
		total++
		if len(out) < limit {
			out = append(out, *r)
		}
	}
	return out, total, nil
}

// Requeue implements Store.
func (s *MemoryStore) Requeue(_ context.Context, ids []string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, id := range ids {
		if r := s.rows[id]; r != nil && !r.FailedAt.IsZero() {
			r.FailedAt, r.ErrorCode, r.ErrorMessage = time.Time{}, "", ""
			r.ClaimedBy, r.ClaimedAt = "", time.Time{}
			n++
		}
	}
	return n, nil
}

// SetAside implements Store.
func (s *MemoryStore) SetAside(_ context.Context, ids []string, code jobs.Code, message string, now time.Time) (int, error) {
	if err := checkSetAside(code); err != nil {
		return 0, err
	}
	message = boundMessage(message)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, id := range ids {
		if r := s.rows[id]; r != nil && r.FailedAt.IsZero() {
			r.FailedAt, r.ErrorCode, r.ErrorMessage = now, code, message
			r.ClaimedBy, r.ClaimedAt = "", time.Time{}
			n++
		}
	}
	return n, nil
}

// Drop implements Store.
func (s *MemoryStore) Drop(_ context.Context, ids []string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, id := range ids {
		if r := s.rows[id]; r != nil && !r.FailedAt.IsZero() {
			delete(s.rows, id)
			n++
		}
	}
	return n, nil
}
