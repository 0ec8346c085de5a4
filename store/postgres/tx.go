package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// CreateInTx creates a run inside tx, a transaction the caller opened on this store's database
// and will commit or roll back: the run row, its RunStarted and its timer exist if and only if
// tx commits. Idempotency is RunCreate's (a live run of the same (Job, Key) is returned Deduped),
// and with a dedupeID RunCreateOnce's. The ready notification is queued in tx too, and Postgres
// delivers a NOTIFY only at commit, so pollers hear of the run exactly when it exists.
//
// tx must be at READ COMMITTED, Postgres's default: a create racing another of the same key
// reads the winner's row after its insert waited for it, which a repeatable-read snapshot
// cannot see.
func (s *Store) CreateInTx(ctx context.Context, tx pgx.Tx, dedupeID string, p store.CreateRunParams) (store.CreateRunResult, error) {
	if tx == nil {
		return store.CreateRunResult{}, jobs.Errorf(jobs.CodeOutboxNoTx, "postgres create in a transaction: no transaction")
	}
	t := &txn{s: s, op: "run create in caller's transaction", ext: tx}
	var res store.CreateRunResult
	if dedupeID != "" {
		var err error
		if res, err = s.createOnce(ctx, t, store.OnceParams{ID: dedupeID, Create: p}); err != nil {
			return store.CreateRunResult{}, err
		}
	} else {
		if err := checkCreate(p); err != nil {
			return store.CreateRunResult{}, err
		}
		out, b, err := s.createRuns(ctx, t, []store.CreateRunParams{p})
		if err != nil {
			return store.CreateRunResult{}, err
		}
		if err := t.commit(ctx, b); err != nil {
			return store.CreateRunResult{}, err
		}
		res = out[0]
	}
	res.Run = cloneRun(res.Run)
	return res, nil
}
