package testenv

import (
	"context"
	"sync/atomic"

	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// HistoryReads is a store that counts its history reads: the tests of what a wake-up reads.
type HistoryReads struct {
	store.Store
	n atomic.Int64
}

// CountHistoryReads wraps st.
func CountHistoryReads(st store.Store) *HistoryReads { return &HistoryReads{Store: st} }

// HistoryRead implements store.Store, counting the call.
func (s *HistoryReads) HistoryRead(ctx context.Context, id string, after int64, limit int) ([]history.Event, error) {
	s.n.Add(1)
	return s.Store.HistoryRead(ctx, id, after, limit)
}

// Count is how many history reads were made so far.
func (s *HistoryReads) Count() int64 { return s.n.Load() }
