package store

import (
	"context"
	"time"
)

// RateLimits is the durable count behind the engine's keyed rate limits (jobs.RateBy): a sliding
// log of starts per key, each row expiring one period after its start. Keeping it in the store,
// not in an engine's memory, is what lets every engine process share one allowance and keeps a
// rolling restart from granting a fresh one.
type RateLimits interface {
	// RateTake counts a start of p.Key at p.Now if fewer than p.Limit starts of the key are
	// still counted (their period has not passed at p.Now); ok reports whether it did. When not,
	// retryAt is the earliest time a start can be counted again (assuming no other start is
	// counted meanwhile). The check and the count are one atomic step: concurrent callers never
	// count more than Limit starts of a key within one period. A holder already counted for the
	// key (its start's period has not passed) is ok and counted no more: a run claimed again
	// before it recorded anything (handed back, its worker restarted, its lease lapsed) is the
	// same start, and counting it twice held it back behind its own first start.
	RateTake(ctx context.Context, p RateParams) (ok bool, retryAt time.Time, err error)

	// RatePrune deletes every count whose period passed at or before now, and returns how many.
	RatePrune(ctx context.Context, now time.Time) (int, error)
}

// RateParams counts one start of Key by Holder (a run id) at Now: at most Limit per Per.
type RateParams struct {
	Key    string
	Holder string
	Limit  int
	Per    time.Duration
	Now    time.Time
}
