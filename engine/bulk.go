package engine

import (
	"cmp"
	"context"
	"slices"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// BulkCreate writes prepared runs in one transaction (store.BulkCreator's contract); EnqueueManyIn
// takes one bound to a caller's transaction.
type BulkCreate func(ctx context.Context, ps []store.CreateRunParams) ([]store.CreateRunResult, error)

// EnqueueMany implements jobs.BulkEnqueuer: every item is checked as Enqueue checks it (a refused
// item is answered with its error and the others go on), and the accepted ones are created in one
// transaction with the store's bulk write. Idempotency is per item and per tenant: two items with
// one (job, key) for two tenants are two runs.
//
// Dedupe ids are refused per item: they are written one transaction per id (RunCreateOnce), and
// a bulk call that quietly split into one transaction per item would not be the call it says
// it is. The outbox and durable enqueues, which carry them, enqueue one at a time.
func (e *Engine) EnqueueMany(ctx context.Context, reqs []jobs.EnqueueRequest) ([]jobs.EnqueueItem, error) {
	return e.EnqueueManyIn(ctx, e.store.RunCreateBulk, reqs)
}

// EnqueueManyIn is EnqueueMany with the runs written by create (outbox.SameDB binds it to the
// caller's transaction).
func (e *Engine) EnqueueManyIn(ctx context.Context, create BulkCreate, reqs []jobs.EnqueueRequest) ([]jobs.EnqueueItem, error) {
	if create == nil {
		return nil, jobs.Errorf(jobs.CodeInvariant, "bulk enqueue: no create")
	}
	if len(reqs) > jobs.MaxEnqueueMany {
		return nil, jobs.Errorf(jobs.CodePayloadTooLarge, "bulk enqueue of %d items; the limit is %d", len(reqs), jobs.MaxEnqueueMany)
	}
	now := e.clock.Now()
	out := make([]jobs.EnqueueItem, len(reqs))
	ps := make([]store.CreateRunParams, 0, len(reqs))
	idx := make([]int, 0, len(reqs))
	for i, req := range reqs {
		if req.DedupeID != "" {
			out[i].Error = jobs.Errorf(jobs.CodeBadRequest, "bulk enqueue item %d of %q carries a dedupe id: enqueue it on its own", i, req.Job)
			continue
		}
		p, err := e.PrepareRun(ctx, req, now)
		if err != nil {
			if jobs.CodeOf(err) == jobs.CodeStoreUnavailable {
				return nil, err // the manifest could not be read: no item can be judged
			}
			out[i].Error = jobs.AsError(err)
			continue
		}
		ps = append(ps, p)
		idx = append(idx, i)
	}
	if len(ps) == 0 {
		return out, nil
	}
	orderIDs(ps)
	res, err := create(ctx, ps)
	if err != nil {
		return nil, err
	}
	if len(res) != len(ps) {
		return nil, jobs.Errorf(jobs.CodeInternal, "bulk enqueue: the store answered %d of %d items", len(res), len(ps))
	}
	kick := false
	var ready map[string]int // new runs ready now, by queue
	for k, i := range idx {
		if err := notTheCallers(reqs[i], ps[k], res[k]); err != nil {
			out[i].Error = jobs.AsError(err)
			continue
		}
		out[i] = jobs.EnqueueItem{RunID: res[k].Run.ID, Deduped: res[k].Deduped}
		if !res[k].Deduped {
			if ps[k].Timer != nil {
				kick = true
			} else {
				if ready == nil {
					ready = map[string]int{}
				}
				ready[ps[k].Run.Queue]++
			}
		}
	}
	if kick {
		e.timers.Kick()
	}
	for q, n := range ready {
		e.matching.WakeQueue(q, n)
	}
	return out, nil
}

// orderIDs hands the batch's run ids out again so that id order is (job, key, tenant) order. Every
// id of a batch is made at one instant, so which item holds which is free; the store writes a
// batch in (job, key, tenant) order (two batches holding overlapping keys then lock in one order), and with
// ids in that order too every index of runs and history (the primary keys, the listings' (…, id)
// entries, the claim's) receives the batch in ascending order: each entry goes to the rightmost
// leaf, which Postgres reaches without a descent and splits without leaving half-empty pages,
// instead of landing at random among the batch's other entries.
func orderIDs(ps []store.CreateRunParams) {
	ids := make([]string, len(ps))
	order := make([]int, len(ps))
	for i := range ps {
		ids[i], order[i] = ps[i].Run.ID, i
	}
	slices.Sort(ids)
	slices.SortStableFunc(order, func(a, b int) int {
		ra, rb := &ps[a].Run, &ps[b].Run
		return cmp.Or(cmp.Compare(ra.Job, rb.Job), cmp.Compare(ra.Key, rb.Key), cmp.Compare(ra.Tenant, rb.Tenant))
	})
	for j, i := range order {
		ps[i].Run.ID = ids[j]
	}
}
