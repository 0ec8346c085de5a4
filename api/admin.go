package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api/paging"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/wire"
	"github.com/ultimat3/jobs/store"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written here is one of this package's types: failing to encode it is a
		// bug, and still deserves a well-formed answer.
		status = http.StatusInternalServerError
		b, _ = json.Marshal(ErrorBody{Error: jobs.Wrap(jobs.CodeInternal, err, "encode the response")})
	}
	w.Header().Set("Content-Type", ContentJSON)
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// reply writes a success in the request's codec: msgpack to a msgpack request, else JSON.
func reply(w http.ResponseWriter, r *http.Request, status int, v any) error {
	if isMsgpack(r) {
		b, err := encodeMsgpack(v)
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", ContentMsgpack)
		w.WriteHeader(status)
		_, _ = w.Write(b)
		return nil
	}
	writeJSON(w, status, v)
	return nil
}

// pathID reads and checks a run id from the path.
func pathID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if id == "" {
		return "", jobs.Errorf(jobs.CodeBadRequest, "the path names no run")
	}
	return id, checkText("run id", id)
}

// enqueue starts a run by job name. A JSON body names its input as JSON (see EnqueueBody); a
// msgpack body is a jobs.EnqueueRequest whose input is already msgpack (the Go client's), so a
// typed caller's bytes reach the worker exactly as it encoded them.
func (s *Server) enqueue(w http.ResponseWriter, r *http.Request) error {
	b, err := readBody(r)
	if err != nil {
		return err
	}
	var req jobs.EnqueueRequest
	if isMsgpack(r) {
		if err := decodeMsgpack(b, &req); err != nil {
			return err
		}
		if len(req.Input) > 0 {
			// The input is stored and later decoded by a worker: refuse a malformed one here,
			// where the caller can still be told.
			if err := wire.Value(req.Input); err != nil {
				return err
			}
		}
	} else {
		var body EnqueueBody
		if err := decodeJSON(b, &body); err != nil {
			return err
		}
		if req, err = body.request(); err != nil {
			return err
		}
	}
	if err := checkEnqueue(r, req); err != nil {
		return err
	}
	res, err := s.eng.Enqueue(r.Context(), req)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if res.Deduped {
		status = http.StatusOK
	}
	return reply(w, r, status, res)
}

// publish publishes an event; the body is its payload, JSON or msgpack, and the match parameter
// its match fields (publish.go).
func (s *Server) publish(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := checkText("event name", name); err != nil {
		return err
	}
	b, err := readBody(r)
	if err != nil {
		return err
	}
	var payload []byte
	if isMsgpack(r) {
		if err := wire.Value(b); err != nil {
			return err
		}
		payload = b
	} else if payload, err = jobs.FromJSON(b); err != nil {
		return err
	}
	match, err := matchOf(r) // publish.go
	if err != nil {
		return err
	}
	res, err := s.eng.PublishMatched(r.Context(), jobs.PublishRequest{Event: name, Payload: payload, Match: match})
	if err != nil {
		return err
	}
	return reply(w, r, http.StatusOK, res)
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var body CancelBody
	if err := readJSON(r, &body); err != nil {
		return err
	}
	if err := checkText("reason", body.Reason); err != nil {
		return err
	}
	run, err := s.eng.Cancel(r.Context(), id, body.Reason)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, engine.Summarize(run))
	return nil
}

func (s *Server) retry(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var body RetryBody
	if err := readJSON(r, &body); err != nil {
		return err
	}
	for field, v := range map[string]string{"fromStep": body.FromStep, "by": body.By, "reason": body.Reason} {
		if err := checkText(field, v); err != nil {
			return err
		}
	}
	run, err := s.eng.Retry(r.Context(), engine.RetryRequest{RunID: id, FromStep: body.FromStep, By: body.By, Reason: body.Reason})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, engine.Summarize(run))
	return nil
}

func readJSON(r *http.Request, v any) error {
	b, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeJSON(b, v)
}

// getRun answers a run with its per-step trace.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	v, err := s.eng.InspectRun(r.Context(), id)
	if err != nil {
		return err
	}
	if t := credentialOf(r).Tenant; t != "" {
		// The run is this tenant's (authorize); its links to another tenant's runs are not.
		scoped := v.Family.Scoped(t)
		if v.Family.Parent != nil && scoped.Parent == nil && strings.HasPrefix(v.EnqueuedBy, "run:") {
			v.EnqueuedBy = "run" // started by a run this credential may not see
		}
		v.Family = scoped
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// listParams reads the filters and the page of a listing: queue, state, job, tenant, before
// (the cursor) and limit, the page's two by the rule of every listing (package paging).
func listParams(r *http.Request, withState bool) (store.ListParams, error) {
	q := r.URL.Query()
	p := store.ListParams{Queue: q.Get("queue"), Job: q.Get("job"), Tenant: q.Get("tenant"), Before: q.Get("before")}
	for field, v := range map[string]string{"queue": p.Queue, "job": p.Job, "tenant": p.Tenant, "before": p.Before} {
		if err := checkText(field, v); err != nil {
			return p, err
		}
	}
	if st := q.Get("state"); st != "" {
		if !withState {
			return p, jobs.Errorf(jobs.CodeBadRequest, "this listing takes no state filter")
		}
		if !slices.Contains(store.States, store.State(st)) {
			return p, jobs.Errorf(jobs.CodeBadRequest, "state %q is not one of %v", st, store.States)
		}
		p.State = store.State(st)
	}
	if err := paging.Cursor(p.Before); err != nil {
		return p, err
	}
	var err error
	p.Limit, err = paging.Limit(q.Get("limit"), paging.Default, paging.Max)
	return p, err
}

// page trims a listing fetched with one row more than asked: that extra row says whether a next
// page exists, so the last page never ends with a cursor to an empty one.
func page(runs []engine.RunSummary, limit int) RunPage {
	p := RunPage{Runs: runs}
	if len(runs) > limit {
		p.Runs = runs[:limit]
		p.Next = runs[limit-1].ID
	}
	if p.Runs == nil {
		p.Runs = []engine.RunSummary{}
	}
	return p
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) error {
	p, err := listParams(r, true)
	if err != nil {
		return err
	}
	limit := p.Limit
	p.Limit++
	runs, err := s.eng.ListRuns(r.Context(), p)
	if err != nil {
		return err
	}
	out := make([]engine.RunSummary, len(runs))
	for i, run := range runs {
		out[i] = engine.Summarize(run)
	}
	writeJSON(w, http.StatusOK, page(out, limit))
	return nil
}

func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) error {
	p, err := listParams(r, false)
	if err != nil {
		return err
	}
	limit := p.Limit
	p.Limit++
	runs, err := s.eng.InspectDeadLetters(r.Context(), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page(runs, limit))
	return nil
}

// runHistory answers a run's history as the dump format: JSON lines (format=jsonl, the default,
// what history.Load reads) or one JSON array of the same objects (format=json).
func (s *Server) runHistory(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	format := r.URL.Query().Get("format")
	if format != "" && format != "jsonl" && format != "json" {
		return jobs.Errorf(jobs.CodeBadRequest, "format %q: want jsonl or json", format)
	}
	events, err := s.eng.History(r.Context(), id, 0)
	if err != nil {
		return err
	}
	// Rendered whole before the first byte goes out, so a failure is still a clean refusal.
	var buf bytes.Buffer
	if err := history.Dump(&buf, events); err != nil {
		return jobs.Wrap(jobs.CodeEncoding, err, "dump the history of run %s", id)
	}
	if format == "json" {
		lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte{'\n'})
		arr := make([]json.RawMessage, 0, len(lines))
		for _, l := range lines {
			if len(l) > 0 {
				arr = append(arr, l)
			}
		}
		writeJSON(w, http.StatusOK, arr)
		return nil
	}
	w.Header().Set("Content-Type", ContentJSONL)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
	return nil
}

func (s *Server) queues(w http.ResponseWriter, r *http.Request) error {
	qs, err := s.eng.InspectQueues(r.Context())
	if err != nil {
		return err
	}
	if qs == nil {
		qs = []engine.QueueView{}
	}
	writeJSON(w, http.StatusOK, QueueList{Queues: qs})
	return nil
}

func (s *Server) codes(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, CodeList{Codes: jobs.Codes()})
	return nil
}
