package memory

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/ultimat3/jobs/store"
)

// rateStart is one counted start of a key: it counts until until (its start plus the period).
type rateStart struct {
	until  time.Time
	holder string
}

// RateTake implements store.RateLimits. A key's starts are kept in order of until, so the ones
// whose period passed are a prefix and the k-th oldest is at index k.
func (s *Store) RateTake(ctx context.Context, p store.RateParams) (bool, time.Time, error) {
	if err := s.lock(ctx); err != nil {
		return false, time.Time{}, err
	}
	defer s.mu.Unlock()
	if s.rates == nil {
		s.rates = map[string][]rateStart{}
	}
	starts := s.rates[p.Key]
	i := 0
	for i < len(starts) && !starts[i].until.After(p.Now) {
		i++
	}
	starts = starts[i:]
	for _, st := range starts {
		if st.holder == p.Holder {
			s.rates[p.Key] = starts
			return true, time.Time{}, nil // the same start, counted once
		}
	}
	if len(starts) >= p.Limit {
		s.rates[p.Key] = starts
		// Room comes back when the oldest starts beyond Limit-1 have lapsed.
		return false, starts[len(starts)-p.Limit].until, nil
	}
	rs := rateStart{until: p.Now.Add(p.Per), holder: p.Holder}
	at, _ := slices.BinarySearchFunc(starts, rs, func(a, b rateStart) int {
		if c := a.until.Compare(b.until); c != 0 {
			return c
		}
		return strings.Compare(a.holder, b.holder)
	})
	s.rates[p.Key] = slices.Insert(starts, at, rs)
	return true, time.Time{}, nil
}

// RatePrune implements store.RateLimits.
func (s *Store) RatePrune(ctx context.Context, now time.Time) (int, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	n := 0
	for k, starts := range s.rates {
		i := 0
		for i < len(starts) && !starts[i].until.After(now) {
			i++
		}
		n += i
		if i == len(starts) {
			delete(s.rates, k)
		} else {
			s.rates[k] = starts[i:]
		}
	}
	return n, nil
}
