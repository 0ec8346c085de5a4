package api

import (
	"context"

	"github.com/ultimat3/jobs"
)

var _ jobs.BulkEnqueuer = (*Client)(nil)

// EnqueueMany implements jobs.BulkEnqueuer over POST /v1/runs/bulk, in msgpack, so every input's
// bytes reach the worker exactly as the caller encoded them. The engine's MaxBody bounds the
// request: a call over it is X_PAYLOAD_TOO_LARGE and writes nothing; split the items.
func (c *Client) EnqueueMany(ctx context.Context, reqs []jobs.EnqueueRequest) ([]jobs.EnqueueItem, error) {
	if len(reqs) > jobs.MaxEnqueueMany {
		return nil, jobs.Errorf(jobs.CodePayloadTooLarge, "bulk enqueue of %d items; the limit is %d", len(reqs), jobs.MaxEnqueueMany)
	}
	var out BulkEnqueueResponse
	if err := c.callMsgpack(ctx, "/v1/runs/bulk", BulkEnqueueRequest{Items: reqs}, &out, c.timeout, jobs.CodeStoreUnavailable); err != nil {
		return nil, err
	}
	if len(out.Items) != len(reqs) {
		return nil, jobs.Errorf(jobs.CodeEncoding, "bulk enqueue: the engine answered %d of %d items", len(out.Items), len(reqs))
	}
	return out.Items, nil
}
