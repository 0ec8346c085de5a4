package jobs

import "context"

// TxEnqueuer enqueues inside a transaction the caller holds open, so the enqueue commits or rolls
// back with the caller's own writes. It is bound to that transaction by whoever knows its
// driver: outbox.Outbox.Tx stages the enqueue as an outbox row (any database), and
// outbox.SameDB.Tx writes the run itself when the caller's Postgres is the engine's store.
type TxEnqueuer interface {
	EnqueueTx(ctx context.Context, req EnqueueRequest) (EnqueueResult, error)
}

// EnqueueTx enqueues a run of the job inside tx: the run exists (or its outbox row is staged) if
// and only if the caller's transaction commits.
//
//	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		if err := saveOrder(ctx, tx, order); err != nil {
//			return err
//		}
//		_, err := SendReceipt.EnqueueTx(ctx, ob.Tx(outbox.Pgx(tx)), Receipt{OrderID: order.ID})
//		return err
//	})
func (j *Job[In, Out]) EnqueueTx(ctx context.Context, tx TxEnqueuer, in In) (EnqueueResult, error) {
	if tx == nil {
		return EnqueueResult{}, Errorf(CodeOutboxNoTx, "enqueue of %q: no transaction", j.name)
	}
	req, err := j.Request(in)
	if err != nil {
		return EnqueueResult{}, err
	}
	return tx.EnqueueTx(ctx, req)
}
