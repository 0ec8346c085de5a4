package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/ultimat3/jobs"
)

// Match fields travel beside an event's payload as the query parameter "match", a JSON object
// (POST /v1/events/{name}?match={"orderId":"o-1"}): the body stays the payload, JSON or msgpack,
// so a codec's envelope goes as the msgpack body unchanged and the engine matches only on the
// parameter. Integral numbers are integers, as in a JSON payload.

const matchParam = "match"

var _ jobs.EventPublisher = (*Client)(nil)

// matchOf returns the request's match fields; nil when it gives none.
func matchOf(r *http.Request) (map[string]any, error) {
	q := r.URL.Query()
	if !q.Has(matchParam) {
		return nil, nil
	}
	doc := []byte(q.Get(matchParam))
	b, err := jobs.FromJSON(doc)
	if err != nil {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "the %s parameter: %s", matchParam, strings.TrimPrefix(err.Error(), string(jobs.CodeBadRequest)+": "))
	}
	var m map[string]any
	if err := jobs.Decode(b, &m); err != nil || m == nil {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "the %s parameter must be a JSON object of field → value", matchParam)
	}
	return m, nil
}

// PublishMatched implements jobs.EventPublisher: the payload goes as msgpack, byte for byte (an
// envelope stays one), and the match fields as the match parameter.
func (c *Client) PublishMatched(ctx context.Context, req jobs.PublishRequest) (jobs.Published, error) {
	var out jobs.Published
	var q url.Values
	if req.Match != nil {
		doc, err := json.Marshal(req.Match)
		if err != nil {
			return out, jobs.Wrap(jobs.CodeBadRequest, err, "event %q: the match fields are not JSON", req.Event)
		}
		q = url.Values{matchParam: {string(doc)}}
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/events/"+pathSegment(req.Event), q, ContentMsgpack, req.Payload, c.timeout, jobs.CodeStoreUnavailable)
	if err != nil {
		return out, err
	}
	return out, decodeAs(resp, &out)
}
