package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/inputcheck"
	"github.com/ultimat3/jobs/store"
)

// BackfillOpen implements frontend.Backfills.
func (c *Client) BackfillOpen(ctx context.Context, req frontend.BackfillOpenRequest) (frontend.BackfillOpenResponse, error) {
	var out frontend.BackfillOpenResponse
	err := c.callMsgpack(ctx, "/v1/worker/backfill/open", req, &out, c.timeout, jobs.CodeStoreUnavailable)
	if noRoute(err) {
		// An engine from before backfills: it keeps no ledger, and the pass runs anyway.
		return frontend.BackfillOpenResponse{Ledger: false}, nil
	}
	return out, err
}

// noRoute reports the engine's answer to a route it does not serve.
func noRoute(err error) bool {
	var e *jobs.Error
	return errors.As(err, &e) && (e.Code == jobs.CodeRouteNotFound || (e.Code == jobs.CodeBadRequest && strings.HasPrefix(e.Message, "no route for ")))
}

// BackfillReport implements frontend.Backfills. Reports are idempotent, so a lost answer is
// simply sent again.
func (c *Client) BackfillReport(ctx context.Context, req frontend.BackfillReportRequest) error {
	var out struct{}
	return c.callMsgpack(ctx, "/v1/worker/backfill/report", req, &out, c.timeout, jobs.CodeStoreUnavailable)
}

// Backfills reads the ledger's projection (engine.InspectBackfills), newest pass first. The
// filter reads as store.BackfillFilter says: Tenant selects one tenant's passes, NoTenant (ignored
// when Tenant is set) the passes of no tenant.
func (c *Client) Backfills(ctx context.Context, f store.BackfillFilter) ([]backfill.Progress, error) {
	if err := inputcheck.Fields("name", f.Name, "tenant", f.Tenant, "status", f.Status, "run", f.RunID); err != nil {
		return nil, err
	}
	q := url.Values{}
	for k, v := range map[string]string{"name": f.Name, "tenant": f.Tenant, "status": f.Status, "run": f.RunID} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.NoTenant && f.Tenant == "" {
		q.Set("notenant", "true")
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out BackfillList
	err := c.callJSON(ctx, http.MethodGet, "/v1/backfills", q, nil, &out)
	return out.Backfills, err
}

// DeclaredBackfills returns the backfills the engine knows are declared.
func (c *Client) DeclaredBackfills(ctx context.Context) ([]backfill.Declaration, error) {
	var out DeclaredList
	err := c.callJSON(ctx, http.MethodGet, "/v1/backfills/declared", nil, nil, &out)
	return out.Declarations, err
}

// PendingBackfills returns declared minus completed for an environment.
func (c *Client) PendingBackfills(ctx context.Context, env string) (backfill.Report, error) {
	var out backfill.Report
	err := c.callJSON(ctx, http.MethodGet, "/v1/backfills/pending", url.Values{"env": {env}}, nil, &out)
	return out, err
}
