package postgres

import (
	"cmp"
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// bulkMin is the batch from which RunCreateBulk streams with COPY; a smaller one is RunCreate,
// whose array parameters are cheaper than a staging table for a handful of rows.
const bulkMin = 64

// RunCreateBulk implements store.BulkCreator. A large batch is streamed with COPY into a
// temporary staging table and moved into runs with one INSERT … SELECT … ON CONFLICT DO NOTHING,
// and the RunStarted events are streamed with COPY straight into history: COPY's binary rows
// cost the server far less to parse than the arrays RunCreate binds, and the runs written are
// never read back (the caller's params are what was written). Only the items the insert left
// out (a live run holds their key) go through RunCreate's path, in the same transaction, which
// reads the holder and retries a key whose holder finished meanwhile.
func (s *Store) RunCreateBulk(ctx context.Context, ps []store.CreateRunParams) ([]store.CreateRunResult, error) {
	if len(ps) < bulkMin {
		return s.RunCreate(ctx, ps)
	}
	t, err := s.begin(ctx, "run create bulk")
	if err != nil {
		return nil, err
	}
	defer t.release()
	out, b, err := s.createBulk(ctx, t, ps)
	if err != nil {
		return nil, err
	}
	if err := t.commit(ctx, b); err != nil {
		return nil, err
	}
	return out, nil
}

// CreateBulkInTx is RunCreateBulk inside tx, a transaction the caller opened on this store's
// database (see CreateInTx): the runs exist if and only if tx commits.
func (s *Store) CreateBulkInTx(ctx context.Context, tx pgx.Tx, ps []store.CreateRunParams) ([]store.CreateRunResult, error) {
	if tx == nil {
		return nil, jobs.Errorf(jobs.CodeOutboxNoTx, "postgres bulk create in a transaction: no transaction")
	}
	t := &txn{s: s, op: "run create bulk in caller's transaction", ext: tx}
	out, b, err := s.createBulk(ctx, t, ps)
	if err != nil {
		return nil, err
	}
	if err := t.commit(ctx, b); err != nil {
		return nil, err
	}
	return out, nil
}

// copyFrom streams rows into table on the transaction's connection.
func (t *txn) copyFrom(ctx context.Context, table pgx.Identifier, cols []string, rows [][]any) error {
	var err error
	if t.ext != nil {
		_, err = t.ext.CopyFrom(ctx, table, cols, pgx.CopyFromRows(rows))
	} else {
		_, err = t.conn.CopyFrom(ctx, table, cols, pgx.CopyFromRows(rows))
	}
	if err != nil {
		return unavailable(t.op, err)
	}
	return nil
}

// createBulk is RunCreateBulk inside t, up to its last pipeline, which t's commit must carry.
func (s *Store) createBulk(ctx context.Context, t *txn, ps []store.CreateRunParams) ([]store.CreateRunResult, *pgx.Batch, error) {
	for i, p := range ps {
		if p.Run.ID == "" {
			return nil, nil, jobs.Errorf(jobs.CodeInvariant, "create run %d of %d: no id", i+1, len(ps))
		}
		if p.Run.State != store.StateReady && p.Run.State != store.StateDelayed {
			return nil, nil, jobs.Errorf(jobs.CodeInvariant, "create run %s in state %q: want ready or delayed",
				p.Run.ID, p.Run.State)
		}
	}
	// The common batch (no key held by a live run) is streamed straight into runs; only a
	// batch that meets a held key pays for the staging table and its ON CONFLICT.
	inserted, err := s.copyRuns(ctx, t, ps)
	if err != nil {
		return nil, nil, err
	}
	fast := inserted != nil
	if !fast {
		if inserted, err = s.stageRuns(ctx, t, ps); err != nil {
			return nil, nil, err
		}
	}

	out := make([]store.CreateRunResult, len(ps))
	var left []int // items a live run's key kept out
	var evs []int  // items whose RunStarted is written
	var timers timerRows
	var ready []string
	for i, p := range ps {
		if !inserted[p.Run.ID] {
			left = append(left, i)
			continue
		}
		r := p.Run
		r.LastSeq = 1
		r.ReadyAt, r.CreatedAt = pgTime(r.ReadyAt), pgTime(r.CreatedAt)
		r.UpdatedAt = r.CreatedAt
		r.Input = append([]byte(nil), r.Input...)
		out[i] = store.CreateRunResult{Run: r}
		if !s.startedImplied(&ps[i]) {
			evs = append(evs, i)
		}
		if p.Timer != nil {
			timers.add(r.ID, *p.Timer)
		}
		if r.State == store.StateReady {
			ready = append(ready, r.Queue)
		}
	}
	if len(evs) > 0 {
		// In id order, so that history's primary key takes them in ascending order (the engine
		// hands a batch's ids out in the order its runs are written: see engine.orderIDs).
		slices.SortFunc(evs, func(a, b int) int { return cmp.Compare(ps[a].Run.ID, ps[b].Run.ID) })
		c := newCopyRows(120, len(evs))
		for _, i := range evs {
			e := &ps[i].Started
			c.row(len(historyColumns))
			c.text(ps[i].Run.ID)
			c.int8(1) // seq
			c.text(string(e.Kind))
			c.text(e.Name)
			c.timestamptz(e.At, false)
			c.bytea(e.Data)
		}
		if err := c.send(ctx, t, pgx.Identifier{s.schema, "history"}, historyColumns); err != nil {
			return nil, nil, unavailable(t.op, err)
		}
	}
	var tail *pgx.Batch
	if len(left) > 0 {
		// The holders are read, and a key whose holder finished meanwhile is inserted, by
		// RunCreate's own path; its pipeline carries their history and notification.
		sub := make([]store.CreateRunParams, len(left))
		for j, i := range left {
			sub[j] = ps[i]
		}
		res, b, err := s.createRuns(ctx, t, sub)
		if err != nil {
			return nil, nil, err
		}
		for j, i := range left {
			res[j].Run = cloneRun(res[j].Run)
			out[i] = res[j]
		}
		tail = b
	} else {
		tail = t.batch()
	}
	if fast {
		tail.Queue(sqlBulkRelease)
	}
	timers.queue(s, tail)
	s.notifyFresh(tail, ready)
	return out, tail, nil
}

// stageRuns is the slow path of a bulk create: COPY into a temporary staging table, then one
// INSERT … SELECT … ON CONFLICT DO NOTHING into runs, which leaves out the rows whose key a live
// run holds. It returns the ids it inserted.
func (s *Store) stageRuns(ctx context.Context, t *txn, ps []store.CreateRunParams) (map[string]bool, error) {
	b := t.batch()
	b.Queue(sqlBulkStage)
	if err := t.send(ctx, b); err != nil {
		return nil, err
	}
	rows := make([][]any, len(ps))
	for i, p := range ps {
		r := p.Run
		rows[i] = []any{r.ID, r.Job, r.Queue, r.Key, r.Tenant, r.NoTenant, r.EnqueuedBy, r.Input,
			string(r.State), int32(r.Attempt), ts(r.ReadyAt), r.CreatedAt, r.TraceParent, r.TraceState,
			int32(r.Priority), int32(i)}
	}
	if err := t.copyFrom(ctx, pgx.Identifier{"pg_temp", "jobs_bulk_runs"}, bulkStageColumns, rows); err != nil {
		return nil, err
	}
	inserted := make(map[string]bool, len(ps))
	b = t.batch()
	b.Queue(s.render(sqlBulkInsert)).Query(func(rs pgx.Rows) error {
		for rs.Next() {
			var id string
			if err := rs.Scan(&id); err != nil {
				return err
			}
			inserted[id] = true
		}
		return rs.Err()
	})
	b.Queue(sqlBulkUnstage)
	if err := t.send(ctx, b); err != nil {
		if isUniqueViolation(err, "runs_pkey") {
			return nil, jobs.Wrap(jobs.CodeInvariant, err, "postgres bulk run create: a run id is taken")
		}
		return nil, err
	}

	return inserted, nil
}
