package api

import (
	"net/http"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/wire"
)

// BulkEnqueueBody is the JSON body of POST /v1/runs/bulk: items as POST /v1/runs takes them.
type BulkEnqueueBody struct {
	Items []EnqueueBody `json:"items"`
}

// BulkEnqueueRequest is the msgpack body of POST /v1/runs/bulk (the Go client's): inputs are
// already msgpack.
type BulkEnqueueRequest struct {
	Items []jobs.EnqueueRequest `msgpack:"items"`
}

// BulkEnqueueResponse answers POST /v1/runs/bulk: one item per request item, in order.
type BulkEnqueueResponse struct {
	Items []jobs.EnqueueItem `json:"items" msgpack:"items"`
}

// enqueueMany starts many runs in one call and one transaction. Each item is checked as POST
// /v1/runs checks an enqueue (text, identity, tenant scope, the input's encoding); a refused item
// is answered with its error and writes nothing, the others go on. A refusal of the call itself
// (a malformed body, too many items, the store unavailable) writes nothing at all. The answer is
// 200 with the per-item results whatever each item's outcome: a caller reads the items.
func (s *Server) enqueueMany(w http.ResponseWriter, r *http.Request) error {
	b, err := readBody(r)
	if err != nil {
		return err
	}
	var reqs []jobs.EnqueueRequest
	var errs []*jobs.Error // an item refused while decoding, by position
	if isMsgpack(r) {
		var body BulkEnqueueRequest
		if err := decodeMsgpack(b, &body); err != nil {
			return err
		}
		reqs = body.Items
		errs = make([]*jobs.Error, len(reqs))
		for i, req := range reqs {
			if len(req.Input) > 0 {
				if err := wire.Value(req.Input); err != nil {
					errs[i] = jobs.AsError(err)
				}
			}
		}
	} else {
		var body BulkEnqueueBody
		if err := decodeJSON(b, &body); err != nil {
			return err
		}
		reqs = make([]jobs.EnqueueRequest, len(body.Items))
		errs = make([]*jobs.Error, len(reqs))
		for i, it := range body.Items {
			// The one conversion POST /v1/runs makes (EnqueueBody.request): every field an
			// item names reaches the engine, and is checked, as it would one at a time.
			if reqs[i], err = it.request(); err != nil {
				errs[i] = jobs.AsError(err)
			}
		}
	}
	if len(reqs) > jobs.MaxEnqueueMany {
		return jobs.Errorf(jobs.CodePayloadTooLarge, "bulk enqueue of %d items; the limit is %d", len(reqs), jobs.MaxEnqueueMany)
	}
	for i, req := range reqs {
		if errs[i] != nil {
			continue
		}
		if err := checkEnqueue(r, req); err != nil {
			errs[i] = jobs.AsError(err)
		}
	}
	// Only the items that passed go to the engine; the answer puts every item back in place.
	send := make([]jobs.EnqueueRequest, 0, len(reqs))
	idx := make([]int, 0, len(reqs))
	for i, req := range reqs {
		if errs[i] == nil {
			send = append(send, req)
			idx = append(idx, i)
		}
	}
	out := make([]jobs.EnqueueItem, len(reqs))
	for i, e := range errs {
		out[i].Error = e
	}
	if len(send) > 0 {
		res, err := s.eng.EnqueueMany(r.Context(), send)
		if err != nil {
			return err
		}
		for k, i := range idx {
			out[i] = res[k]
		}
	}
	return reply(w, r, http.StatusOK, BulkEnqueueResponse{Items: out})
}

// checkEnqueue is every check of one enqueue before the engine is asked: POST /v1/runs's, and
// each item's of a bulk enqueue (text, identity, priority and delay ranges, tenant scope).
func checkEnqueue(r *http.Request, req jobs.EnqueueRequest) error {
	for field, v := range map[string]string{"job": req.Job, "queue": req.Queue, "key": req.Key,
		"tenant": req.Tenant, "enqueuedBy": req.EnqueuedBy} {
		if err := checkText(field, v); err != nil {
			return err
		}
	}
	if err := req.Validate(); err != nil {
		return err
	}
	return checkEnqueueScope(r, req.Tenant, req.NoTenant)
}
