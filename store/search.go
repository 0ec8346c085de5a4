package store

import (
	"context"
	"sort"
	"time"
)

// RunQuery is what an operator filters a run listing by. It extends ListParams (whose Before
// still pages by id, newest first: keyset paging, never an offset) with the filters a UI needs
// over a large table. Empty fields do not filter.
type RunQuery struct {
	ListParams
	// Key is an exact idempotency key.
	Key string
	// CreatedFrom and CreatedTo bound CreatedAt: From ≤ CreatedAt < To.
	CreatedFrom time.Time
	CreatedTo   time.Time
}

// FinishedCount is how many runs of a queue reached a final state within one time bucket.
type FinishedCount struct {
	Queue string
	State State // completed, failed or cancelled
	// Bucket is the bucket's index from Since: FinishedAt in [Since+Bucket*Width, +Width).
	Bucket int
	Count  int
}

// Searcher answers the operator's listing questions, each from an index, so a page of a
// million-run table reads a page of rows. Only the filters present go into the query, so the
// database can pick the index that serves them.
type Searcher interface {
	// RunSearch lists runs matching q, newest first (by id), at most q.Limit (≤ 0: all).
	RunSearch(ctx context.Context, q RunQuery) ([]Run, error)
	// RunFinishedCounts counts the runs that finished at or after since, by queue, final state
	// and bucket of width (> 0). Empty groups are absent.
	RunFinishedCounts(ctx context.Context, since time.Time, width time.Duration) ([]FinishedCount, error)
}

// SortFinishedCounts puts counts in the order every backend returns them: by queue, state,
// bucket.
func SortFinishedCounts(cs []FinishedCount) {
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.Queue != b.Queue {
			return a.Queue < b.Queue
		}
		if a.State != b.State {
			return a.State < b.State
		}
		return a.Bucket < b.Bucket
	})
}
