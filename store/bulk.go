package store

import "context"

// BulkCreator creates many runs in one call, sized for thousands at a time (a bulk enqueue).
//
// Its contract is RunCreate's, item by item: every run is created with its RunStarted event, or,
// when a live run holds its (Job, Tenant, Key) (a stored run, or an earlier item of the same
// call), that run is returned Deduped and nothing is written for the item. Two items with one
// (Job, Key) for two tenants are two runs. The whole call is one
// transaction: after an error nothing of it is stored. It exists beside RunCreate because a
// backend may write a large batch differently from the small batches of the create loop (the
// Postgres store streams it with COPY).
type BulkCreator interface {
	RunCreateBulk(ctx context.Context, runs []CreateRunParams) ([]CreateRunResult, error)
}
