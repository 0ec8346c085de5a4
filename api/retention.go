package api

import (
	"net/http"

	"github.com/ultimat3/jobs"
)

// retentionAllowed refuses a tenant-scoped credential: retention is the whole engine's, every
// tenant's runs at once, so a tenant's operator neither sees its report nor runs it.
func retentionAllowed(r *http.Request, act bool) error {
	c := credentialOf(r)
	if c.Tenant != "" {
		return jobs.Errorf(jobs.CodeForbidden, "retention covers every tenant's runs: a credential scoped to tenant %q may not use it", c.Tenant)
	}
	// Deleting history is beyond an operator's enqueue, cancel and retry.
	if act && c.Role != RoleAdmin {
		return jobs.Errorf(jobs.CodeForbidden, "running retention deletes runs and their histories: an admin credential may, %s may not (a dry run needs only a viewer)", c.Role.Credential())
	}
	return nil
}

// retentionDryRun answers GET /v1/retention: what a sweep would delete now.
func (s *Server) retentionDryRun(w http.ResponseWriter, r *http.Request) error {
	if err := retentionAllowed(r, false); err != nil {
		return err
	}
	rep, err := s.eng.SweepRetention(r.Context(), true)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

// retentionRun answers POST /v1/retention/run: a sweep now, as the sweeper would make it.
func (s *Server) retentionRun(w http.ResponseWriter, r *http.Request) error {
	if err := retentionAllowed(r, true); err != nil {
		return err
	}
	var body RetentionRunBody
	if err := readJSON(r, &body); err != nil {
		return err
	}
	rep, err := s.eng.SweepRetention(r.Context(), false)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}
