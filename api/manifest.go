package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/inputcheck"
)

// declareManifest records a worker's manifest (msgpack, the worker protocol).
func (s *Server) declareManifest(w http.ResponseWriter, r *http.Request) error {
	var m frontend.Manifest
	if err := readMsgpack(r, &m); err != nil {
		return err
	}
	resp, err := s.eng.DeclareManifest(r.Context(), m)
	if err != nil {
		return err
	}
	return writeMsgpack(w, resp)
}

// manifest answers the fleet's manifest (JSON), optionally of one kind (?kind=job).
func (s *Server) manifest(w http.ResponseWriter, r *http.Request) error {
	kind := r.URL.Query().Get("kind")
	if err := inputcheck.Fields("kind", kind); err != nil {
		return err
	}
	var v engine.ManifestView
	var err error
	if kind == "" {
		v, err = s.eng.InspectManifest(r.Context())
	} else {
		v.Workers = []engine.WorkerView{}
		v.Declarations, err = s.eng.Declarations(r.Context(), kind)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// DeclareManifest implements frontend.Frontend: it sends the worker's manifest.
func (c *Client) DeclareManifest(ctx context.Context, m frontend.Manifest) (frontend.ManifestResponse, error) {
	var out frontend.ManifestResponse
	err := c.callMsgpack(ctx, "/v1/worker/manifest", m, &out, c.timeout, jobs.CodeStoreUnavailable)
	return out, err
}

// Manifest returns the fleet's manifest: every declaration with the workers that declare it, and
// every worker. kind, when not empty, keeps the declarations of that kind.
func (c *Client) Manifest(ctx context.Context, kind string) (engine.ManifestView, error) {
	var out engine.ManifestView
	if err := inputcheck.Fields("kind", kind); err != nil {
		return out, err
	}
	var q url.Values
	if kind != "" {
		q = url.Values{"kind": {kind}}
	}
	err := c.callJSON(ctx, http.MethodGet, "/v1/manifest", q, nil, &out)
	return out, err
}
