package api

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/client"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/inputcheck"
)

// Waiting for a run's result over HTTP is a long-poll: GET /v1/runs/{id}/result?wait=25s holds
// the request until the run is terminal or the wait (capped at Config.MaxPollWait) passes, and
// answers 200 with an engine.RunResult either way (Done says which). The client asks again
// until Done or its ctx ends, so a wait of any length survives proxies' idle timeouts.

// defaultResultWait is a long-poll's wait when the request names none.
const defaultResultWait = 25 * time.Second

func (s *Server) runResult(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	wait := defaultResultWait
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return jobs.Errorf(jobs.CodeBadRequest, "wait %q: want a duration such as 25s", v)
		}
		wait = d
	}
	wait = min(wait, s.cfg.MaxPollWait)
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	// A draining server answers at once: the client asks again, elsewhere or later.
	stop := context.AfterFunc(s.drainCtx, cancel)
	defer stop()
	res, err := s.eng.WaitResult(ctx, id)
	switch {
	case res.Done:
		// Finished, completed or not: the outcome is the answer, its error inside it.
	case err != nil && ctx.Err() != nil && r.Context().Err() == nil:
		// The wait passed: not finished yet.
	case err != nil:
		return err
	}
	if strings.Contains(r.Header.Get("Accept"), ContentMsgpack) {
		b, err := encodeMsgpack(res)
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", ContentMsgpack)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b)
		return nil
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// WaitResult blocks until the run is terminal or ctx ends (see engine.Engine.WaitResult), by
// long-polls of at most the client's timeout each. A failed or cancelled run returns its outcome
// with its error; a completed one its result (RunResult.Decode).
func (c *Client) WaitResult(ctx context.Context, runID string) (engine.RunResult, error) {
	if err := inputcheck.RunID(runID); err != nil {
		return engine.RunResult{}, err
	}
	wait := c.timeout
	for {
		resp, err := c.do(ctx, http.MethodGet, "/v1/runs/"+pathSegment(runID)+"/result",
			url.Values{"wait": {wait.String()}}, ContentMsgpack, nil, wait+c.timeout, jobs.CodeStoreUnavailable)
		if err != nil {
			return engine.RunResult{}, err
		}
		var res engine.RunResult
		if err := decodeAs(resp, &res); err != nil {
			return engine.RunResult{}, err
		}
		if res.Done {
			if res.Error != nil {
				return res, res.Error
			}
			return res, nil
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
}

// Identity is who a credential is: GET /v1/whoami.
type Identity struct {
	Role   Role   `json:"role"`
	Tenant string `json:"tenant,omitempty"`
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) error {
	c := credentialOf(r)
	writeJSON(w, http.StatusOK, Identity{Role: c.Role, Tenant: c.Tenant})
	return nil
}

// WhoAmI returns the role (and tenant) of the client's token, as the engine sees it.
func (c *Client) WhoAmI(ctx context.Context) (Identity, error) {
	var out Identity
	err := c.callJSON(ctx, http.MethodGet, "/v1/whoami", nil, nil, &out)
	return out, err
}

// The HTTP client is the remote implementation of the operator's API.
var _ client.Client = (*Client)(nil)
