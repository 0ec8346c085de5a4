package api

import (
	"net/http"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api/paging"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/freetext"
	"github.com/ultimat3/jobs/internal/inputcheck"
	"github.com/ultimat3/jobs/store"
)

// The backfill routes: the pass's ledger calls (worker protocol, msgpack) and the ledger's
// projection, the declarations and the pending report (admin API, JSON).

// BackfillList is the answer of GET /v1/backfills.
type BackfillList struct {
	Backfills []backfill.Progress `json:"backfills"`
}

// DeclaredList is the answer of GET /v1/backfills/declared.
type DeclaredList struct {
	Declarations []backfill.Declaration `json:"declarations"`
}

func (s *Server) backfillOpen(w http.ResponseWriter, r *http.Request) error {
	var req frontend.BackfillOpenRequest
	if err := readMsgpack(r, &req); err != nil {
		return err
	}
	if err := checkText("worker id", req.WorkerID); err != nil {
		return err
	}
	resp, err := s.eng.BackfillOpen(r.Context(), req)
	if err != nil {
		return err
	}
	return writeMsgpack(w, resp)
}

func (s *Server) backfillReport(w http.ResponseWriter, r *http.Request) error {
	var req frontend.BackfillReportRequest
	if err := readMsgpack(r, &req); err != nil {
		return err
	}
	if err := checkText("worker id", req.WorkerID); err != nil {
		return err
	}
	req.Error = freetext.Clean(req.Error)
	if err := s.eng.BackfillReport(r.Context(), req); err != nil {
		return err
	}
	return writeMsgpack(w, struct{}{})
}

func (s *Server) listBackfills(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := store.BackfillFilter{Name: q.Get("name"), Tenant: q.Get("tenant"), Status: q.Get("status"), RunID: q.Get("run")}
	// The rule client.Local applies to the same filter (inputcheck.Fields).
	if err := inputcheck.Fields("name", f.Name, "tenant", f.Tenant, "status", f.Status, "run", f.RunID); err != nil {
		return err
	}
	// tenant selects one tenant's passes (a per-tenant backfill's ledger is per (name, tenant));
	// notenant=true the passes of no tenant (a backfill declared for every tenant); neither,
	// every pass.
	switch nt := q.Get("notenant"); nt {
	case "", "false":
	case "true":
		f.NoTenant = true
	default:
		return jobs.Errorf(jobs.CodeBadRequest, "notenant %q: want true or false", nt)
	}
	if f.NoTenant && f.Tenant != "" {
		return jobs.Errorf(jobs.CodeBadRequest, "tenant and notenant=true select no pass together: give one")
	}
	var err error
	if f.Limit, err = paging.Limit(q.Get("limit"), 0, paging.MaxBackfills); err != nil {
		return err
	}
	rows, err := s.eng.InspectBackfills(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, BackfillList{Backfills: rows})
	return nil
}

func (s *Server) declaredBackfills(w http.ResponseWriter, r *http.Request) error {
	ds, err := s.eng.DeclaredBackfills(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, DeclaredList{Declarations: ds})
	return nil
}

func (s *Server) pendingBackfills(w http.ResponseWriter, r *http.Request) error {
	env := r.URL.Query().Get("env")
	if err := checkText("env", env); err != nil {
		return err
	}
	rep, err := s.eng.PendingBackfills(r.Context(), env)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}
