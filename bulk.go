package jobs

import (
	"context"
	"errors"
)

// MaxEnqueueMany bounds the items of one bulk enqueue: the call is one transaction, and a
// transaction of this size already writes its rows at the store's full speed; a larger load is
// several calls.
const MaxEnqueueMany = 50_000

// EnqueueItem is one item's outcome in a bulk enqueue: a run started or found (Deduped, as
// Enqueue's), or the item's own refusal. A refused item writes nothing and does not stop the
// others.
type EnqueueItem struct {
	RunID   string `json:"runId,omitempty" msgpack:"run_id,omitempty"`
	Deduped bool   `json:"deduped,omitempty" msgpack:"deduped,omitempty"`
	Error   *Error `json:"error,omitempty" msgpack:"error,omitempty"`
}

// BulkEnqueuer starts many runs in one call and one transaction: the engine, or the HTTP client.
// The items are answered in order. An error of the call itself (the store was unavailable, too
// many items) means none of the items was written.
type BulkEnqueuer interface {
	EnqueueMany(ctx context.Context, reqs []EnqueueRequest) ([]EnqueueItem, error)
}

// TxBulkEnqueuer is BulkEnqueuer inside a transaction the caller holds open (see TxEnqueuer):
// the runs exist if and only if the caller's transaction commits.
type TxBulkEnqueuer interface {
	EnqueueManyTx(ctx context.Context, reqs []EnqueueRequest) ([]EnqueueItem, error)
}

// EnqueueMany starts a run of the job for every input, in one call and one transaction. Each
// input keeps its own idempotency: an input whose key a live run holds (or an earlier input of
// the same call) gets that run back, Deduped. An input the job cannot turn into a request (its
// key or tenant function refused it, it does not encode) is refused in its own item.
func (j *Job[In, Out]) EnqueueMany(ctx context.Context, c BulkEnqueuer, ins []In) ([]EnqueueItem, error) {
	return j.enqueueMany(ins, func(reqs []EnqueueRequest) ([]EnqueueItem, error) { return c.EnqueueMany(ctx, reqs) })
}

// EnqueueManyTx is EnqueueMany inside tx (outbox.SameDB's Tx on Postgres).
func (j *Job[In, Out]) EnqueueManyTx(ctx context.Context, tx TxBulkEnqueuer, ins []In) ([]EnqueueItem, error) {
	if tx == nil {
		return nil, Errorf(CodeOutboxNoTx, "bulk enqueue of %q: no transaction", j.name)
	}
	return j.enqueueMany(ins, func(reqs []EnqueueRequest) ([]EnqueueItem, error) { return tx.EnqueueManyTx(ctx, reqs) })
}

func (j *Job[In, Out]) enqueueMany(ins []In, send func([]EnqueueRequest) ([]EnqueueItem, error)) ([]EnqueueItem, error) {
	if len(ins) > MaxEnqueueMany {
		return nil, Errorf(CodePayloadTooLarge, "bulk enqueue of %q: %d items; the limit is %d", j.name, len(ins), MaxEnqueueMany)
	}
	out := make([]EnqueueItem, len(ins))
	reqs := make([]EnqueueRequest, 0, len(ins))
	idx := make([]int, 0, len(ins))
	for i, in := range ins {
		req, err := j.Request(in)
		if err != nil {
			out[i].Error = AsError(err)
			continue
		}
		reqs = append(reqs, req)
		idx = append(idx, i)
	}
	if len(reqs) == 0 {
		return out, nil
	}
	res, err := send(reqs)
	if err != nil {
		return nil, err
	}
	if len(res) != len(reqs) {
		return nil, Errorf(CodeInternal, "bulk enqueue of %q: %d answers for %d items", j.name, len(res), len(reqs))
	}
	for k, i := range idx {
		out[i] = res[k]
	}
	return out, nil
}

// AsError is err as an *Error: its own when it carries one, else X_INTERNAL with err's text.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Wrap(CodeInternal, err, "")
}
