package outbox

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/postgres"
)

// SameDB enqueues inside the caller's transaction when the application's Postgres is the
// engine's store: the run itself (its row, its RunStarted, idempotency as any enqueue) is
// written in the caller's pgx transaction, so it exists if and only if the caller commits. There
// is no outbox row and no relay: the engine's pollers hear of the run from the notification
// Postgres sends at commit, or from their fallback poll.
type SameDB struct {
	eng *engine.Engine
	st  *postgres.Store
}

// NewSameDB binds the engine to its Postgres store; st must be the engine's store.
func NewSameDB(eng *engine.Engine, st *postgres.Store) (*SameDB, error) {
	if eng == nil || st == nil {
		return nil, jobs.Errorf(jobs.CodeInvariant, "outbox: same-database enqueue needs the engine and its Postgres store")
	}
	if eng.Store() != store.Store(st) {
		return nil, jobs.Errorf(jobs.CodeInvariant, "outbox: the Postgres store is not the engine's store")
	}
	return &SameDB{eng: eng, st: st}, nil
}

// Tx binds the enqueue to tx, a transaction on the engine's database:
// job.EnqueueTx(ctx, sameDB.Tx(tx), in). A nil tx, typed (a *pgxpool.Tx never assigned) or not,
// is X_OUTBOX_NO_TX.
func (d *SameDB) Tx(tx pgx.Tx) jobs.TxEnqueuer { return sameDBTx{d, tx} }

type sameDBTx struct {
	d  *SameDB
	tx pgx.Tx
}

func (b sameDBTx) EnqueueTx(ctx context.Context, req jobs.EnqueueRequest) (jobs.EnqueueResult, error) {
	if isNil(b.tx) { // a typed nil (a nil *pgxpool.Tx) too: see isNil
		return jobs.EnqueueResult{}, jobs.Errorf(jobs.CodeOutboxNoTx, "enqueue of %q: no transaction", req.Job)
	}
	return b.d.eng.EnqueueIn(ctx, func(ctx context.Context, dedupeID string, p store.CreateRunParams) (store.CreateRunResult, error) {
		return b.d.st.CreateInTx(ctx, b.tx, dedupeID, p)
	}, req)
}
