package outbox

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// BulkTx binds a bulk enqueue to tx, a transaction on the engine's database:
// job.EnqueueManyTx(ctx, sameDB.BulkTx(tx), inputs). A nil tx is X_OUTBOX_NO_TX.
func (d *SameDB) BulkTx(tx pgx.Tx) jobs.TxBulkEnqueuer { return sameDBTx{d, tx} }

// EnqueueManyTx implements jobs.TxBulkEnqueuer: the accepted items' runs are written in the
// caller's transaction with the store's bulk write (COPY), so they exist if and only if it
// commits.
func (b sameDBTx) EnqueueManyTx(ctx context.Context, reqs []jobs.EnqueueRequest) ([]jobs.EnqueueItem, error) {
	if isNil(b.tx) { // a typed nil too: see isNil
		return nil, jobs.Errorf(jobs.CodeOutboxNoTx, "bulk enqueue: no transaction")
	}
	return b.d.eng.EnqueueManyIn(ctx, func(ctx context.Context, ps []store.CreateRunParams) ([]store.CreateRunResult, error) {
		return b.d.st.CreateBulkInTx(ctx, b.tx, ps)
	}, reqs)
}
