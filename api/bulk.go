package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
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
		if err := checkMsgpack(b); err != nil {
			return err
		}
		if n := bulkMsgpackItems(b); n > jobs.MaxEnqueueMany {
			return jobs.Errorf(jobs.CodePayloadTooLarge, "bulk enqueue of %d items; the limit is %d", n, jobs.MaxEnqueueMany)
		}
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
		items, err := decodeBulkJSON(b)
		if err != nil {
			return err
		}
		reqs = make([]jobs.EnqueueRequest, len(items))
		errs = make([]*jobs.Error, len(reqs))
		for i, it := range items {
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
			if res[k].Error != nil {
				out[i].Error = jobs.AsError(scopedRefusal(r, send[k], res[k].Error))
			}
		}
	}
	return reply(w, r, http.StatusOK, BulkEnqueueResponse{Items: out})
}

// checkEnqueue is every check of one enqueue before the engine is asked: POST /v1/runs's, and
// each item's of a bulk enqueue (text, identity, priority and delay ranges, the dedupe id's
// namespace, tenant scope).
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
	if strings.HasPrefix(req.DedupeID, reservedDedupe) {
		return jobs.Errorf(jobs.CodeBadRequest, "dedupeId %q begins with %q, the engine's own namespace: "+
			"the engine dedupes a run's durable enqueues and child starts under call:<run>/<call name> "+
			"(call:<run>@<generation>/<call name> after a retry from a step), "+
			"and a run enqueued under one would take that call's place; choose a dedupe id of your own", req.DedupeID, reservedDedupe)
	}
	return checkEnqueueScope(r, req.Tenant, req.NoTenant)
}

// reservedDedupe begins the dedupe ids the engine gives a run's durable calls (engine/effects.go
// callID: "call:<run>/<call name>"): a durable enqueue or child start is created once per such
// id (RunCreateOnce), and deduped onto whatever run holds it. An API caller may not use one: a
// caller that knew a run's id (a tenant operator that read it, or guessed a call's name) could
// create a run under a call that run has yet to make, and the engine would then hand the call
// that run (or refuse it, X_IDEMPOTENCY_KEY_TAKEN, when it is another tenant's), failing the
// workflow. The engine makes these enqueues itself, never through this API.
//
// The outbox's ids ("outbox:<row id>", outbox.DedupeID) stay open: a relay publishes them
// through this API (an api.Client as its Publisher), under an operator's credential that
// nothing tells apart from another operator's, and a row's id is the producer's, never shown.
const reservedDedupe = "call:"

// scopedRefusal hides, from a credential scoped to a tenant, what an enqueue refusal read from
// the fleet's manifest, which such a credential may not read (GET /v1/manifest spans every
// tenant): the queues a job is declared on (X_JOB_UNDECLARED), the keyed limits a job counts by
// and the input field they read (X_FLOW_KEY). The code stays, and so does what the caller sent;
// only the manifest's part of the message goes. Any other refusal, and every refusal to an
// unscoped credential, is returned as it is.
func scopedRefusal(r *http.Request, req jobs.EnqueueRequest, err error) error {
	if err == nil || credentialOf(r).Tenant == "" {
		return err
	}
	const why = " (a credential scoped to a tenant is not shown the fleet's manifest)"
	switch jobs.CodeOf(err) {
	case jobs.CodeJobUndeclared:
		if req.Queue == "" {
			return jobs.Errorf(jobs.CodeJobUndeclared, "no worker declares job %q"+why, req.Job)
		}
		return jobs.Errorf(jobs.CodeJobUndeclared, "queue %q is not one job %q may be enqueued on: no worker declares it there"+why, req.Queue, req.Job)
	case jobs.CodeFlowKey:
		return jobs.Errorf(jobs.CodeFlowKey, "enqueue of %q: the input holds no value the job's keyed limits can count by"+why, req.Job)
	}
	return err
}

// decodeBulkJSON reads a JSON bulk body ({"items":[…]}) as decodeJSON would decode it into a
// BulkEnqueueBody (an empty body or null is no items; unknown fields and trailing data are
// refused), but item by item: a body of tiny items ({} is two bytes) holds hundreds of thousands
// in MaxBody, and decoding them all, then converting them, before counting them took seconds
// and hundreds of megabytes to refuse. The item past jobs.MaxEnqueueMany is refused as it
// appears, before any item is converted.
func decodeBulkJSON(b []byte) ([]EnqueueBody, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	if err := jobs.ValidJSONText(b); err != nil {
		return nil, err
	}
	malformed := func(err error) error { return jobs.Wrap(jobs.CodeBadRequest, err, "malformed JSON body") }
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	tok, err := dec.Token()
	if err != nil {
		return nil, malformed(err)
	}
	var items []EnqueueBody
	switch tok {
	case nil: // null: as decoding it into the body would, no items
	case json.Delim('{'):
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, malformed(err)
			}
			// encoding/json matches a field's name without regard to case; so does this.
			if key, _ := tok.(string); !strings.EqualFold(key, "items") {
				return nil, malformed(fmt.Errorf("json: unknown field %q", key))
			}
			// A repeated "items" replaces the earlier one, as it would in a struct.
			if items, err = decodeBulkItems(dec); err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil { // the closing brace
			return nil, malformed(err)
		}
	default:
		return nil, malformed(fmt.Errorf("json: cannot unmarshal %s into Go value of type api.BulkEnqueueBody", jsonKind(tok)))
	}
	if dec.More() {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "malformed JSON body: trailing data")
	}
	return items, nil
}

// decodeBulkItems reads the value of "items": null (no items) or an array of at most
// jobs.MaxEnqueueMany items.
func decodeBulkItems(dec *json.Decoder) ([]EnqueueBody, error) {
	malformed := func(err error) error { return jobs.Wrap(jobs.CodeBadRequest, err, "malformed JSON body") }
	tok, err := dec.Token()
	if err != nil {
		return nil, malformed(err)
	}
	switch tok {
	case nil:
		return nil, nil
	case json.Delim('['):
	default:
		return nil, malformed(fmt.Errorf("json: cannot unmarshal %s into Go struct field BulkEnqueueBody.items of type []api.EnqueueBody", jsonKind(tok)))
	}
	var items []EnqueueBody
	for dec.More() {
		if len(items) == jobs.MaxEnqueueMany {
			return nil, jobs.Errorf(jobs.CodePayloadTooLarge, "bulk enqueue of more than %d items; the limit is %d", jobs.MaxEnqueueMany, jobs.MaxEnqueueMany)
		}
		items = append(items, EnqueueBody{})
		if err := dec.Decode(&items[len(items)-1]); err != nil {
			return nil, malformed(err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing bracket
		return nil, malformed(err)
	}
	return items, nil
}

// jsonKind names a JSON token's kind as encoding/json's type errors do.
func jsonKind(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		if tok == json.Delim('[') {
			return "array"
		}
		return "object"
	case string:
		return "string"
	case bool:
		return "bool"
	case float64, json.Number:
		return "number"
	}
	return "value"
}

// bulkMsgpackItems returns how many items a msgpack bulk body's "items" array claims (the last
// one, as decoding keeps the last), read from the array's header before anything is decoded: a
// body of tiny items holds tens of thousands. msgpack decodes a struct from its map form
// ({"items": [...]}) or its array form ([[...]], fields in order, items the first), so both are
// read. Zero when the body is neither or names no items; decoding then says what is wrong. b has
// passed the shape check.
func bulkMsgpackItems(b []byte) (n int) {
	defer func() {
		if recover() != nil {
			n = 0
		}
	}()
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	code, err := dec.PeekCode()
	if err != nil {
		return 0
	}
	if msgpcode.IsFixedArray(code) || code == msgpcode.Array16 || code == msgpcode.Array32 {
		fields, err := dec.DecodeArrayLen()
		if err != nil || fields < 1 {
			return 0
		}
		if n, err = dec.DecodeArrayLen(); err != nil {
			return 0
		}
		return max(n, 0)
	}
	fields, err := dec.DecodeMapLen()
	if err != nil {
		return 0
	}
	for range max(fields, 0) {
		key, err := dec.DecodeString()
		if err != nil {
			return n
		}
		if key != "items" {
			if dec.Skip() != nil {
				return n
			}
			continue
		}
		if n, err = dec.DecodeArrayLen(); err != nil {
			return 0
		}
		for range max(n, 0) {
			if dec.Skip() != nil {
				return n
			}
		}
	}
	return max(n, 0)
}
