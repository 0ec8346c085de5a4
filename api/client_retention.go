package api

import (
	"context"
	"net/http"

	"github.com/ultimat3/jobs/engine"
)

// Retention asks the engine what a retention sweep would delete now (dryRun), or makes one.
func (c *Client) Retention(ctx context.Context, dryRun bool) (engine.RetentionReport, error) {
	var out engine.RetentionReport
	if dryRun {
		return out, c.callJSON(ctx, http.MethodGet, "/v1/retention", nil, nil, &out)
	}
	return out, c.callJSON(ctx, http.MethodPost, "/v1/retention/run", nil, RetentionRunBody{}, &out)
}
