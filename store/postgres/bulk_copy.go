package postgres

import (
	"cmp"
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// copyRuns is the fast path of a bulk create: the runs are streamed with binary COPY straight
// into runs, under a savepoint. COPY has no ON CONFLICT, so a row whose (job, tenant, key) a
// live run holds (stored, or an earlier row of the batch) fails the whole COPY on runs_live_key; the
// savepoint is then rolled back, nothing of the attempt is left, and copyRuns answers nil so
// that the caller takes the staging path, which leaves such rows out one by one. A bulk enqueue
// of fresh keys, the case it is built for, so skips the staging table (its catalog rows), the
// INSERT … SELECT with its sort, and the ids read back.
//
// It answers the ids it inserted (every one), nil when it fell back, or an error. On success
// the savepoint is still open: the caller's tail queues sqlBulkRelease.
func (s *Store) copyRuns(ctx context.Context, t *txn, ps []store.CreateRunParams) (map[string]bool, error) {
	b := t.batch()
	b.Queue(sqlBulkSavepoint)
	if err := t.send(ctx, b); err != nil {
		return nil, err
	}
	// Rows go in (job, key, tenant) order, as RunCreate and the staging INSERT take them, so that
	// two creates holding overlapping keys wait on each other in one order and cannot deadlock.
	order := make([]int, len(ps))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ra, rb := &ps[a].Run, &ps[b].Run
		return cmp.Or(cmp.Compare(ra.Job, rb.Job), cmp.Compare(ra.Key, rb.Key), cmp.Compare(ra.Tenant, rb.Tenant))
	})
	c := newCopyRows(160, len(ps))
	for _, i := range order {
		r := &ps[i].Run
		c.row(len(bulkRunColumns))
		c.text(r.ID)
		c.text(r.Job)
		c.text(r.Queue)
		c.text(r.Key)
		c.text(r.Tenant)
		c.bool(r.NoTenant)
		c.text(r.EnqueuedBy)
		c.bytea(r.Input)
		c.text(string(r.State))
		c.int4(int32(r.Attempt))
		c.timestamptz(r.ReadyAt, true)
		c.int8(1) // last_seq
		c.timestamptz(r.CreatedAt, false)
		c.timestamptz(r.CreatedAt, false) // updated_at
		c.text(r.TraceParent)
		c.text(r.TraceState)
		c.int4(int32(r.Priority))
	}
	err := c.send(ctx, t, pgx.Identifier{s.schema, "runs"}, bulkRunColumns)
	switch {
	case err == nil:
		inserted := make(map[string]bool, len(ps))
		for _, p := range ps {
			inserted[p.Run.ID] = true
		}
		return inserted, nil
	case isUniqueViolation(err, "runs_live_key"):
		// The simple protocol: a statement prepared first would be refused by the aborted
		// (sub)transaction.
		pc := t.pgConn()
		if _, err := pc.Exec(ctx, sqlBulkRollback+"; "+sqlBulkRelease).ReadAll(); err != nil {
			return nil, unavailable(t.op, err)
		}
		return nil, nil
	case isUniqueViolation(err, "runs_pkey"):
		return nil, jobs.Wrap(jobs.CodeInvariant, err, "postgres bulk run create: a run id is taken")
	default:
		return nil, unavailable(t.op, err)
	}
}

// pgConn is the transaction's underlying connection: ours, or the caller's transaction's.
func (t *txn) pgConn() *pgconn.PgConn {
	if t.ext != nil {
		return t.ext.Conn().PgConn()
	}
	return t.conn.Conn().PgConn()
}
