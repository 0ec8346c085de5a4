package sqlite

import (
	"context"

	"github.com/ultimat3/jobs/store"
)

// RunCreateBulk implements store.BulkCreator: RunCreate is one write transaction with one
// prepared insert per item, and on the single writer that is already the cheap way to write a
// large batch (the cost SQLite charges is the fsync, paid once per call).
func (s *Store) RunCreateBulk(ctx context.Context, ps []store.CreateRunParams) ([]store.CreateRunResult, error) {
	return s.RunCreate(ctx, ps)
}
