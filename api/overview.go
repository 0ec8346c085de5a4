package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api/paging"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/inputcheck"
	"github.com/ultimat3/jobs/store"
)

// The operator's overview and run finder over JSON: the same projections the /_x console
// renders (engine.InspectOverview, engine.SearchRuns).

// overview answers GET /v1/overview?window=15m&bucket=1m.
func (s *Server) overview(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var window, bucket time.Duration
	for name, d := range map[string]*time.Duration{"window": &window, "bucket": &bucket} {
		if v := q.Get(name); v != "" {
			p, err := time.ParseDuration(v)
			if err != nil || p <= 0 {
				return jobs.Errorf(jobs.CodeBadRequest, "%s %q: want a positive duration such as 15m", name, v)
			}
			*d = p
		}
	}
	ov, err := s.eng.InspectOverview(r.Context(), window, bucket)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ov)
	return nil
}

// searchRuns answers GET /v1/search/runs: the filters of listRuns plus q (a run id or an
// idempotency key) and createdFrom / createdTo (RFC 3339).
func (s *Server) searchRuns(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := engine.RunFilter{Queue: q.Get("queue"), State: store.State(q.Get("state")), Job: q.Get("job"),
		Tenant: q.Get("tenant"), Search: q.Get("q"), Before: q.Get("before")}
	for name, t := range map[string]*time.Time{"createdFrom": &f.CreatedFrom, "createdTo": &f.CreatedTo} {
		if v := q.Get(name); v != "" {
			p, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return jobs.Errorf(jobs.CodeBadRequest, "%s %q: want an RFC 3339 time", name, v)
			}
			*t = p
		}
	}
	// The page by the rule of every listing (package paging): the engine would read a limit of
	// 0 as its default, and take any text as a cursor.
	if err := paging.Cursor(f.Before); err != nil {
		return err
	}
	var err error
	if f.Limit, err = paging.Limit(q.Get("limit"), paging.Default, paging.Max); err != nil {
		return err
	}
	page, err := s.eng.SearchRuns(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, RunPage{Runs: page.Runs, Next: page.Next})
	return nil
}

// Overview returns every queue's depth and recent throughput (0, 0: the last 15 minutes by
// minute).
func (c *Client) Overview(ctx context.Context, window, bucket time.Duration) (engine.Overview, error) {
	// Refused here, as client.Local refuses it: left out of the query, a negative duration was
	// read by the engine as the default, and answered.
	if err := inputcheck.Overview(window, bucket); err != nil {
		return engine.Overview{}, err
	}
	q := url.Values{}
	if window > 0 {
		q.Set("window", window.String())
	}
	if bucket > 0 {
		q.Set("bucket", bucket.String())
	}
	var out engine.Overview
	err := c.callJSON(ctx, http.MethodGet, "/v1/overview", q, nil, &out)
	return out, err
}

// SearchRuns finds runs (see engine.RunFilter), one keyset page at a time.
func (c *Client) SearchRuns(ctx context.Context, f engine.RunFilter) (RunPage, error) {
	q := url.Values{}
	for k, v := range map[string]string{"queue": f.Queue, "state": string(f.State), "job": f.Job, "tenant": f.Tenant,
		"q": f.Search, "before": f.Before} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !f.CreatedFrom.IsZero() {
		q.Set("createdFrom", f.CreatedFrom.Format(time.RFC3339Nano))
	}
	if !f.CreatedTo.IsZero() {
		q.Set("createdTo", f.CreatedTo.Format(time.RFC3339Nano))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out RunPage
	err := c.callJSON(ctx, http.MethodGet, "/v1/search/runs", q, nil, &out)
	return out, err
}
