package api

import (
	"context"
	"net/http"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/freetext"
)

// Bounds of the worker protocol. They are far above what a worker sends and they keep one
// request's cost on the engine bounded.
const (
	maxPollTasks  = 1000
	maxPollQueues = 256
)

// readMsgpack reads and decodes a worker request.
func readMsgpack(r *http.Request, v any) error {
	if fb, ok := r.Body.(*frameBody); ok {
		// A framed call's body is already whole in its connection's buffer, read under the
		// size limit; decoding copies what it keeps, so it is decoded in place.
		return decodeMsgpack(fb.b, v)
	}
	b, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeMsgpack(b, v)
}

func writeMsgpack(w http.ResponseWriter, v any) error {
	if fw, ok := w.(*frameWriter); ok {
		// A framed answer has no headers (frames.go): encoded straight into its buffer.
		return fw.writeMsgpack(v)
	}
	b, err := encodeMsgpack(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", ContentMsgpack)
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b)
	return err
}

// poll claims work for a worker, holding the request up to the (capped) wait. It returns early,
// with no tasks, when the client goes away or the server starts draining.
func (s *Server) poll(w http.ResponseWriter, r *http.Request) error {
	var req frontend.PollRequest
	if err := readMsgpack(r, &req); err != nil {
		return err
	}
	if req.WorkerID == "" {
		return jobs.Errorf(jobs.CodeBadRequest, "poll names no worker")
	}
	if err := checkText("worker id", req.WorkerID); err != nil {
		return err
	}
	if len(req.Queues) == 0 || len(req.Queues) > maxPollQueues {
		return jobs.Errorf(jobs.CodeBadRequest, "poll names %d queues; want 1 to %d", len(req.Queues), maxPollQueues)
	}
	for _, q := range req.Queues {
		if q == "" {
			return jobs.Errorf(jobs.CodeBadRequest, "poll names an empty queue")
		}
		if err := checkText("queue", q); err != nil {
			return err
		}
	}
	req.Max = min(max(req.Max, 1), maxPollTasks)
	req.Wait = min(max(req.Wait, 0), s.cfg.MaxPollWait)

	if s.drainCtx.Err() != nil {
		return jobs.Errorf(jobs.CodeDraining, "the engine is shutting down")
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.drainCtx, cancel)
	defer stop()

	tasks, err := s.eng.Poll(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			// The wait was cut short (the client left, or we are draining): an empty answer,
			// which a worker that is still there reads as "poll again". The store's error, if
			// it had one, is the cancellation's echo.
			tasks, err = nil, nil
		} else {
			return err
		}
	}
	if tasks == nil {
		tasks = []frontend.Task{}
	}
	tasks, over := budgetTasks(tasks, s.cfg.MaxPollBytes)
	if len(over) > 0 {
		// Claimed, but past what one answer may carry: back at once, no attempt spent.
		s.release(req.WorkerID, over)
	}
	if r.Context().Err() != nil && len(tasks) > 0 {
		// Claimed after the client left: nobody will run them. Hand them back now instead of
		// letting them sit invisible until their lease lapses.
		s.release(req.WorkerID, tasks)
		return nil
	}
	if err := writeMsgpack(w, PollResponse{Tasks: tasks}); err != nil && len(tasks) > 0 {
		s.log.Warn("jobs.api.poll-undelivered", "worker", req.WorkerID, "tasks", len(tasks), "err", err)
		s.release(req.WorkerID, tasks)
	}
	return nil
}

// release hands claimed runs back without spending an attempt, under their fences: if the worker
// did receive them after all, its first write is refused as a stale claim rather than run twice.
func (s *Server) release(workerID string, tasks []frontend.Task) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, t := range tasks {
		_, err := s.eng.Record(ctx, frontend.RecordRequest{RunID: t.RunID, Fence: t.Fence, AfterSeq: t.LastSeq,
			WorkerID: workerID, LeaseToken: t.LeaseToken,
			Commands: []frontend.Command{{Kind: frontend.CmdRelease}}})
		if err != nil {
			s.log.Warn("jobs.api.release-failed", "run", t.RunID, "err", err)
		}
	}
}

// record applies a running run's commands under its fence.
func (s *Server) record(w http.ResponseWriter, r *http.Request) error {
	var req frontend.RecordRequest
	if err := readMsgpack(r, &req); err != nil {
		return err
	}
	if err := checkRecord(&req); err != nil {
		return err
	}
	resp, err := s.eng.Record(r.Context(), req)
	if err != nil {
		return err
	}
	return writeMsgpack(w, resp)
}

// checkRecord refuses a record whose text the engine could not store, and cleans the free text
// that job code produced; the engine checks the rest.
func checkRecord(req *frontend.RecordRequest) error {
	if req.RunID == "" {
		return jobs.Errorf(jobs.CodeBadRequest, "record names no run")
	}
	if err := checkText("run id", req.RunID); err != nil {
		return err
	}
	if err := checkText("worker id", req.WorkerID); err != nil {
		return err
	}
	for i := range req.Commands {
		c := &req.Commands[i]
		// A fixed array, not a map: this runs for every command of every record.
		for _, f := range [...]struct{ field, v string }{{"command kind", string(c.Kind)}, {"command name", c.Name}, {"event", c.Event}} {
			if err := checkText(f.field, f.v); err != nil {
				return err
			}
		}
		for _, m := range c.Match {
			if err := checkText("match", m); err != nil {
				return err
			}
		}
		if c.Effect != nil && len(c.Effect.Input) > 0 {
			// An in-run enqueue's input is stored for a worker to decode, as an enqueue's is.
			if err := checkMsgpack(c.Effect.Input); err != nil {
				return err
			}
		}
		// Free text that job code produced (an error message, an app's code): made storable,
		// never refused, or the failure it reports would be lost.
		c.Code, c.Error, c.Step, c.Stop = freetext.Clean(c.Code), freetext.Clean(c.Error), freetext.Clean(c.Step), freetext.Clean(c.Stop)
	}
	return nil
}

// heartbeat renews a worker's leases.
func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) error {
	var req frontend.HeartbeatRequest
	if err := readMsgpack(r, &req); err != nil {
		return err
	}
	if err := checkText("worker id", req.WorkerID); err != nil {
		return err
	}
	for _, l := range req.Leases {
		if err := checkText("run id", l.RunID); err != nil {
			return err
		}
	}
	if len(req.Leases) == 0 {
		return writeMsgpack(w, frontend.HeartbeatResponse{Codes: []string{}})
	}
	resp, err := s.eng.Heartbeat(r.Context(), req)
	if err != nil {
		return err
	}
	return writeMsgpack(w, resp)
}

// workerHistory reads a run's events after a seq.
func (s *Server) workerHistory(w http.ResponseWriter, r *http.Request) error {
	var req HistoryRequest
	if err := readMsgpack(r, &req); err != nil {
		return err
	}
	if req.RunID == "" {
		return jobs.Errorf(jobs.CodeBadRequest, "history names no run")
	}
	if err := checkText("run id", req.RunID); err != nil {
		return err
	}
	events, err := s.eng.History(r.Context(), req.RunID, max(req.AfterSeq, 0))
	if err != nil {
		return err
	}
	return writeMsgpack(w, HistoryResponse{Events: events})
}
