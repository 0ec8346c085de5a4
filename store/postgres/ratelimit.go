package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs/store"
)

// RateTake implements store.RateLimits in one pipelined round trip: under the key's advisory
// lock (without it, two takers could each count Limit-1 starts and both count the last one),
// the key's lapsed starts are deleted, then one statement counts and inserts.
func (s *Store) RateTake(ctx context.Context, p store.RateParams) (bool, time.Time, error) {
	t, err := s.begin(ctx, "rate take")
	if err != nil {
		return false, time.Time{}, err
	}
	defer t.release()
	var ok bool
	var retry *time.Time
	b := t.batch()
	b.Queue(s.q(stmtLock), s.lockKey("rate", p.Key))
	b.Queue(s.render(sqlRateExpire), p.Key, p.Now)
	b.Queue(s.render(sqlRateTake), p.Key, p.Now.Add(p.Per), p.Holder, p.Limit).QueryRow(func(row pgx.Row) error {
		return row.Scan(&ok, &retry)
	})
	if err := t.commit(ctx, b); err != nil {
		return false, time.Time{}, err
	}
	if ok || retry == nil {
		return ok, time.Time{}, nil
	}
	return false, retry.UTC(), nil
}

// RatePrune implements store.RateLimits.
func (s *Store) RatePrune(ctx context.Context, now time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, s.render(sqlRatePrune), now)
	if err != nil {
		return 0, unavailable("rate prune", err)
	}
	return int(tag.RowsAffected()), nil
}
