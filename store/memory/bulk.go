package memory

import (
	"context"

	"github.com/ultimat3/jobs/store"
)

// RunCreateBulk implements store.BulkCreator: RunCreate already decides every item under one lock
// and writes all or nothing, so a large batch needs nothing of its own here.
func (s *Store) RunCreateBulk(ctx context.Context, ps []store.CreateRunParams) ([]store.CreateRunResult, error) {
	return s.RunCreate(ctx, ps)
}
