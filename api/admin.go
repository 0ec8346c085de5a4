package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api/paging"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/inputcheck"
	"github.com/ultimat3/jobs/internal/uuid7"
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
	return id, inputcheck.RunID(id) // client.Local's rule, and api.Client's before it sends
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
		return scopedRefusal(r, req, err)
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
	// The reason's rule is Engine.Cancel's (jobs.ValidIdentifier: at most 1,000 bytes of UTF-8
	// without NUL), the one every surface gets: the API adds no other.
	run, err := s.eng.Cancel(r.Context(), id, body.Reason)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.redactor(r, id).summary(engine.Summarize(run)))
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
	// fromStep, by and reason are checked by Engine.Retry, by the rule every surface gets.
	run, err := s.eng.Retry(r.Context(), engine.RetryRequest{RunID: id, FromStep: body.FromStep, By: body.By, Reason: body.Reason})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.redactor(r, id).summary(engine.Summarize(run)))
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
	writeJSON(w, http.StatusOK, s.redactor(r, id).view(v))
	return nil
}

// listParams reads the filters and the page of a listing: queue, state, job, tenant, before
// (the cursor) and limit, the page's two by the rule of every listing (package paging).
func listParams(r *http.Request, withState bool) (store.ListParams, error) {
	q := r.URL.Query()
	p := store.ListParams{Queue: q.Get("queue"), Job: q.Get("job"), Tenant: q.Get("tenant"), Before: q.Get("before")}
	// The rule the engine's SearchRuns (client.Local's listing) applies to the same filters.
	if err := inputcheck.Fields("queue", p.Queue, "job", p.Job, "tenant", p.Tenant, "before", p.Before); err != nil {
		return p, err
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
	x := s.redactor(r)
	for _, run := range runs {
		x.own(run.ID) // listed: the credential's tenant's (authorize forced the filter)
	}
	for i, run := range runs {
		out[i] = x.summary(engine.Summarize(run))
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
	x := s.redactor(r)
	for _, run := range runs {
		x.own(run.ID)
	}
	for i := range runs {
		runs[i] = x.summary(runs[i])
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
	// Streamed a page at a time (engine.HistoryPages), each page redacted for the credential's
	// tenant: the answer holds one page, not the history. The first page is read and redacted
	// before the 200 goes out, so a run that is not found (or another tenant's: authorize), a
	// store that fails, is still a clean refusal.
	red := s.redactor(r, id)
	pages := s.eng.HistoryPages(r.Context(), id)
	extend := pageDeadline(w, r)
	next := func(after int64) ([]history.Event, error) {
		extend() // the read of this page and its write: WriteTimeout each, not the whole dump
		events, err := pages(after)
		if err != nil {
			return nil, err
		}
		return red.history(events)
	}
	first, err := next(0)
	if err != nil {
		return dumpRefusal(id, err)
	}
	if format == "json" {
		w.Header().Set("Content-Type", ContentJSON)
	} else {
		w.Header().Set("Content-Type", ContentJSONL)
	}
	w.WriteHeader(http.StatusOK)
	cw := &dumpWriter{w: w}
	firstRead := false
	err = history.DumpPages(cw, func(after int64) ([]history.Event, error) {
		if !firstRead {
			firstRead = true
			return first, nil
		}
		return next(after)
	}, history.DumpOptions{Array: format == "json"})
	if err == nil {
		return nil
	}
	// The 200 and part of the dump went out. A response ended now would read as a whole dump,
	// so the connection is cut instead (HTTP/1.1: no last chunk; HTTP/2: the stream reset): the
	// client sees a body cut short (api.Client.DumpHistory: X_STORE_UNAVAILABLE).
	if cw.err == nil {
		e := s.refusalOf(r, dumpRefusal(id, err))
		s.log.Warn("jobs.api.history-cut-short", "run", id, "code", e.Code, "err", e.Message)
	}
	panic(http.ErrAbortHandler)
}

// pageDeadline returns what gives a streamed answer the serving http.Server's whole WriteTimeout
// again, from now: called before each page is read, it bounds the read of a page and its write
// together, not the whole answer. A dump of gigabytes takes longer
// than WriteTimeout (MaxPollWait + 1 minute, Start), and was cut where the deadline fell. It
// reaches the connection through the server's wrappers (responseWriter, which implements Unwrap);
// a writer without a deadline to set (a ResponseRecorder) is left as it is.
func pageDeadline(w http.ResponseWriter, r *http.Request) func() {
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	if srv == nil || srv.WriteTimeout <= 0 {
		return func() {}
	}
	rc, d := http.NewResponseController(w), srv.WriteTimeout
	return func() { _ = rc.SetWriteDeadline(time.Now().Add(d)) }
}

// dumpRefusal is err of a dump of run id: an event it could not write is X_ENCODING.
func dumpRefusal(id string, err error) error {
	var ee *history.EncodeError
	if errors.As(err, &ee) {
		return jobs.Wrap(jobs.CodeEncoding, err, "dump the history of run %s", id)
	}
	return err
}

// dumpWriter keeps the error of a write to a dump's answer: the client went away, which is not
// the engine's to log.
type dumpWriter struct {
	w   io.Writer
	err error
}

func (d *dumpWriter) Write(p []byte) (int, error) {
	n, err := d.w.Write(p)
	if err != nil && d.err == nil {
		d.err = err
	}
	return n, err
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

// Ids of other tenants' runs, hidden from a tenant-scoped credential.
//
// A run's tenant is its own input's, so the runs of one workflow may belong to several tenants:
// a parent of tenant a may start a child, or enqueue a run, for tenant b. The engine writes the
// ids of such runs into what the other run shows: the enqueued run's enqueuedBy is
// "run:<parent>" (its view, and its history's RunStarted); a child cancelled with its parent
// was given the reason "parent <id> was cancelled" (RunCancelled, and the notes of the sleeps
// and waits it cut short), which histories written before the engine left another tenant's
// parent out of it keep; and an operator's reason, a worker's error, may name any run. A
// credential scoped to tenant b is told that the parent "is not found", so none of these may
// name it.
//
// runRedactor rewrites those fields, and only those: the text the engine (or an operator, a
// worker) wrote, never a run's values (its input, step outputs, result, the payloads it
// received), which are the workflow's own data. The parent's record of the child it started
// stays too (its ChildEnqueued, its step's output, the outcome it awaited): the parent's code
// was handed that id, and holds it. Only the ids that appear are looked up, each once per
// answer, and at most maxRedactLookups of them; an id found in another tenant, not found at all
// (deleted, or another store's), or past the bound is hidden.

// hiddenRun stands for the id of a run the credential may not see.
const hiddenRun = "(hidden run)"

// enqueuedByRun begins the enqueuedBy of a run enqueued by another run's durable call (engine:
// "run:<id>"). Its redacted form is "run": enqueued by a run, which one not said.
const enqueuedByRun = "run:"

// maxRedactLookups bounds the store reads one answer's redaction makes: error texts are a
// worker's, and a history may hold many of them.
const maxRedactLookups = 64

// runRedactor hides, from a credential scoped to a tenant, the ids of runs outside that tenant
// (see above). A nil *runRedactor (an unscoped credential) changes nothing.
type runRedactor struct {
	ctx    context.Context
	eng    *engine.Engine
	tenant string
	// shown holds each id looked up: whether the credential may see it.
	shown  map[string]bool
	looked int
}

// redactor returns the redactor of r's credential, nil when it is not scoped to a tenant. self
// is the run the answer is about, if any: authorize found it in the credential's tenant.
func (s *Server) redactor(r *http.Request, self ...string) *runRedactor {
	t := credentialOf(r).Tenant
	if t == "" {
		return nil
	}
	x := &runRedactor{ctx: r.Context(), eng: s.eng, tenant: t, shown: map[string]bool{}}
	for _, id := range self {
		x.own(id)
	}
	return x
}

// own records that run id is the credential's tenant's, known without a lookup.
func (x *runRedactor) own(id string) {
	if x != nil {
		x.shown[strings.ToLower(id)] = true
	}
}

// visible reports whether the credential may see run id.
func (x *runRedactor) visible(id string) bool {
	id = strings.ToLower(id)
	if v, ok := x.shown[id]; ok {
		return v
	}
	v := false
	if x.looked < maxRedactLookups {
		x.looked++
		run, err := x.eng.GetRun(x.ctx, id)
		v = err == nil && run.Tenant == x.tenant
	}
	x.shown[id] = v
	return v
}

// text replaces in s every run id the credential may not see with hiddenRun.
func (x *runRedactor) text(s string) string {
	if x == nil || len(s) < runIDLen {
		return s
	}
	var b strings.Builder
	last := 0
	for i := 0; i+runIDLen <= len(s); {
		if id := s[i : i+runIDLen]; isRunID(id) {
			if !x.visible(id) {
				b.WriteString(s[last:i])
				b.WriteString(hiddenRun)
				last = i + runIDLen
			}
			i += runIDLen
			continue
		}
		i++
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// actor is text for an actor (enqueuedBy, a retry's by): "run:<id>" of a run the credential may
// not see reads "run".
func (x *runRedactor) actor(s string) string {
	if x == nil {
		return s
	}
	if id, ok := strings.CutPrefix(s, enqueuedByRun); ok {
		if x.visible(id) {
			return s
		}
		return strings.TrimSuffix(enqueuedByRun, ":")
	}
	return x.text(s)
}

// runIDLen is the length of a run id: a UUIDv7 in its canonical text form.
const runIDLen = uuid7.Len

// isRunID reports whether s has the form of a run id: a version 7 UUID, hex digits of either
// case. It reads no store: it only picks the words worth looking up.
func isRunID(s string) bool { return uuid7.IsText(s, true) && s[14] == '7' }

// summary redacts a run's summary: its error and stop reason.
func (x *runRedactor) summary(s engine.RunSummary) engine.RunSummary {
	if x == nil {
		return s
	}
	s.Error, s.StopReason = x.text(s.Error), x.text(s.StopReason)
	return s
}

// view redacts a run's view: its links to runs of other tenants (engine.Family.Scoped), the ids
// of such runs in its text, and its waiting reason, which becomes the one the engine words for a
// scoped caller (engine.RunView.WaitingScoped: no queue, worker or limit of the manifest).
func (x *runRedactor) view(v engine.RunView) engine.RunView {
	if x == nil {
		return v
	}
	// The links say whose each linked run is: those need no lookup.
	scoped := v.Family.Scoped(x.tenant)
	if p := v.Family.Parent; p != nil {
		x.shown[strings.ToLower(p.ParentID)] = scoped.Parent != nil
	}
	for _, c := range v.Family.Children {
		x.shown[strings.ToLower(c.RunID)] = false
	}
	for _, c := range scoped.Children {
		x.shown[strings.ToLower(c.RunID)] = true
	}
	v.Family = scoped
	v.RunSummary = x.summary(v.RunSummary)
	v.EnqueuedBy = x.actor(v.EnqueuedBy)
	v.Waiting, v.WaitingScoped = x.text(v.WaitingScoped), ""
	for i := range v.Steps {
		v.Steps[i].Note = x.text(v.Steps[i].Note)
	}
	for i := range v.Attempts {
		v.Attempts[i].Error = x.text(v.Attempts[i].Error)
	}
	for i := range v.Retries {
		v.Retries[i].By, v.Retries[i].Reason = x.actor(v.Retries[i].By), x.text(v.Retries[i].Reason)
	}
	return v
}

// history redacts a run's history for its dump: an event holding the id of a run the credential
// may not see is encoded again without it, its "data" as well as its "view" (data is the stored
// payload, base64: hiding the view alone would hide nothing). A redacted dump still loads
// (history.Load) and replays, but it is no longer byte for byte the stored history: a body that
// reads its enqueuedBy, or a failed step's error, sees the redacted text.
func (x *runRedactor) history(events []history.Event) ([]history.Event, error) {
	if x == nil {
		return events, nil
	}
	copied := false // the events are the engine's: changed in a copy, never in place
	for i, ev := range events {
		switch ev.Kind {
		case history.KindRunStarted, history.KindAttemptFailed, history.KindStepFailed, history.KindRunBlocked,
			history.KindRunFailed, history.KindRunCancelled, history.KindRunRetried:
		default:
			continue // no text an engine, a worker or an operator wrote
		}
		p, err := ev.Decode()
		if err != nil {
			// Not shown rather than shown unread: what it holds cannot be checked.
			return nil, err
		}
		if p, changed := x.payload(p); changed {
			if !copied {
				events, copied = slices.Clone(events), true
			}
			out := history.New(ev.At, p)
			out.Seq = ev.Seq
			events[i] = out
		}
	}
	return events, nil
}

// payload redacts one event's payload and reports whether it changed.
func (x *runRedactor) payload(p history.Payload) (history.Payload, bool) {
	changed := false
	redact := func(f func(string) string, s *string) {
		if v := f(*s); v != *s {
			*s, changed = v, true
		}
	}
	switch v := p.(type) {
	case history.RunStarted:
		redact(x.actor, &v.EnqueuedBy)
		p = v
	case history.AttemptFailed:
		redact(x.text, &v.Error)
		p = v
	case history.StepFailed:
		redact(x.text, &v.Error)
		p = v
	case history.RunBlocked:
		redact(x.text, &v.Error)
		p = v
	case history.RunFailed:
		redact(x.text, &v.Error)
		p = v
	case history.RunCancelled:
		redact(x.text, &v.Reason)
		p = v
	case history.RunRetried:
		redact(x.actor, &v.By)
		redact(x.text, &v.Reason)
		p = v
	}
	return p, changed
}
