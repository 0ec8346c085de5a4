package api

import (
	"context"
	"net/http"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
)

// The worker's session over HTTP (see frontend.Sessions): start and stop are plain calls; attend
// is a request the server holds open, so a worker process that dies (its kernel closes its
// sockets) is seen at once, on a connection the worker keeps anyway.

// SessionResponse answers a session call.
type SessionResponse struct{}

// WorkerStart implements frontend.Sessions.
func (c *Client) WorkerStart(ctx context.Context, s frontend.Session) error {
	return c.callMsgpack(ctx, "/v1/worker/start", s, &SessionResponse{}, c.timeout, jobs.CodeStoreUnavailable)
}

// WorkerStop implements frontend.Sessions.
func (c *Client) WorkerStop(ctx context.Context, s frontend.Session) error {
	return c.callMsgpack(ctx, "/v1/worker/stop", s, &SessionResponse{}, c.timeout, jobs.CodeStoreUnavailable)
}

// Attend implements frontend.Sessions: the server holds the request up to s.Wait (capped by its
// MaxPollWait).
func (c *Client) Attend(ctx context.Context, s frontend.Session) error {
	return c.callMsgpack(ctx, "/v1/worker/session", s, &SessionResponse{}, max(s.Wait, 0)+c.timeout, jobs.CodeStoreUnavailable)
}

func (s *Server) readSession(r *http.Request) (frontend.Session, error) {
	var req frontend.Session
	if err := readMsgpack(r, &req); err != nil {
		return req, err
	}
	if req.WorkerID == "" {
		return req, jobs.Errorf(jobs.CodeBadRequest, "session names no worker")
	}
	// The engine keeps a record per worker id while its session is live: an id is bounded like
	// every other name the engine keeps (1,000 bytes), or one attend could pin a megabyte.
	return req, jobs.ValidIdentifier("worker id", req.WorkerID)
}

func (s *Server) workerStart(w http.ResponseWriter, r *http.Request) error {
	req, err := s.readSession(r)
	if err != nil {
		return err
	}
	if err := s.eng.WorkerStart(r.Context(), req); err != nil {
		return err
	}
	return writeMsgpack(w, SessionResponse{})
}

func (s *Server) workerStop(w http.ResponseWriter, r *http.Request) error {
	req, err := s.readSession(r)
	if err != nil {
		return err
	}
	if err := s.eng.WorkerStop(r.Context(), req); err != nil {
		return err
	}
	return writeMsgpack(w, SessionResponse{})
}

// attend holds a worker's session open. It ends with an empty answer when the wait passes (the
// worker attends again), X_DRAINING when the server drains, and with nothing when the worker's
// connection drops: that, and only that, is reported to the engine as a dropped session.
func (s *Server) attend(w http.ResponseWriter, r *http.Request) error {
	req, err := s.readSession(r)
	if err != nil {
		return err
	}
	if s.drainCtx.Err() != nil {
		return jobs.Errorf(jobs.CodeDraining, "the engine is shutting down")
	}
	wait := req.Wait
	if wait <= 0 || wait > s.cfg.MaxPollWait {
		wait = s.cfg.MaxPollWait
	}
	s.eng.SessionOpened(req.WorkerID)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		s.eng.SessionAnswered(req.WorkerID) // live still: the worker attends again at once
		return writeMsgpack(w, SessionResponse{})
	case <-s.drainCtx.Done():
		s.eng.SessionAnswered(req.WorkerID)
		return jobs.Errorf(jobs.CodeDraining, "the engine is shutting down")
	case <-r.Context().Done():
		if s.drainCtx.Err() == nil {
			s.eng.SessionDropped(req.WorkerID)
		}
		return nil
	}
}
