package sqlite

import (
	"context"

	"github.com/ultimat3/jobs/store"
)

// SlotAcquire implements store.Store. A slot is held while its Until is after now. Lapsed slots
// are deleted first, so a holder whose slot lapsed competes for a free slot like anyone else
// (if it was taken meanwhile, the holder lost it), and holders that crashed without releasing
// do not accumulate.
func (s *Store) SlotAcquire(ctx context.Context, p store.SlotParams) (bool, error) {
	var ok bool
	err := s.write(ctx, "acquire slot", func(t *wtx) error {
		if _, err := t.exec(sqlSlotsExpire, p.Key, encTime(p.Now)); err != nil {
			return err
		}
		var holders, mine int
		if err := t.queryRow(sqlSlotHolders, p.Holder, p.Key).Scan(&holders, &mine); err != nil {
			return err
		}
		if mine == 0 && holders >= p.Limit {
			return nil
		}
		if _, err := t.exec(sqlSlotUpsert, p.Key, p.Holder, encTime(p.Until)); err != nil {
			return err
		}
		ok = true
		return nil
	})
	if err != nil {
		return false, err
	}
	return ok, nil
}

// SlotRelease implements store.Store. Releasing a slot not held is not an error.
func (s *Store) SlotRelease(ctx context.Context, key, holder string) error {
	return s.write(ctx, "release slot", func(t *wtx) error {
		_, err := t.exec(sqlSlotRelease, key, holder)
		return err
	})
}
