package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs/store"
)

// SlotAcquire takes or renews p.Holder's slot of p.Key in one round trip: under the key's
// advisory lock (without it, two acquirers could each count Limit-1 holders and both take the
// last slot), lapsed slots are swept, including the holder's own (a holder whose slot lapsed
// competes for a free one like anyone else), and the holder's slot is written if it still holds
// one or fewer than Limit others do.
func (s *Store) SlotAcquire(ctx context.Context, p store.SlotParams) (bool, error) {
	t, err := s.begin(ctx, "slot acquire")
	if err != nil {
		return false, err
	}
	defer t.release()
	var ok bool
	b := t.batch()
	b.Queue(s.q(stmtLock), s.slotLock(p.Key))
	b.Queue(s.q(stmtSlotSweep), p.Key, p.Now)
	b.Queue(s.q(stmtSlotAcquire), p.Key, p.Holder, p.Now, p.Until, p.Limit).QueryRow(func(row pgx.Row) error {
		return row.Scan(&ok)
	})
	if err := t.commit(ctx, b); err != nil {
		return false, err
	}
	return ok, nil
}

// SlotRelease deletes the holder's slot; releasing a slot not held is not an error.
func (s *Store) SlotRelease(ctx context.Context, key, holder string) error {
	if _, err := s.pool.Exec(ctx, s.q(stmtSlotRelease), key, holder); err != nil {
		return unavailable("slot release", err)
	}
	return nil
}
