package sqlite

import (
	"context"
	"time"

	"github.com/ultimat3/jobs/store"
)

// RateTake implements store.RateLimits. SQLite has one writer, so the count and the insert share
// a write transaction no other take can slip into.
func (s *Store) RateTake(ctx context.Context, p store.RateParams) (bool, time.Time, error) {
	var ok bool
	var retry time.Time
	err := s.write(ctx, "rate take", func(t *wtx) error {
		if _, err := t.exec(sqlRateExpire, p.Key, encTime(p.Now)); err != nil {
			return err
		}
		var n int
		if err := t.queryRow(sqlRateHeld, p.Key, p.Holder).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			ok = true // the same start, counted once
			return nil
		}
		if err := t.queryRow(sqlRateCount, p.Key).Scan(&n); err != nil {
			return err
		}
		if n >= p.Limit {
			var until int64
			if err := t.queryRow(sqlRateNth, p.Key, n-p.Limit).Scan(&until); err != nil {
				return err
			}
			retry = decTime(until)
			return nil
		}
		if _, err := t.exec(sqlRateInsert, p.Key, encTime(p.Now.Add(p.Per)), p.Holder); err != nil {
			return err
		}
		ok = true
		return nil
	})
	if err != nil {
		return false, time.Time{}, err
	}
	return ok, retry, nil
}

// RatePrune implements store.RateLimits.
func (s *Store) RatePrune(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.write(ctx, "rate prune", func(t *wtx) error {
		res, err := t.exec(sqlRatePrune, encTime(now))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
