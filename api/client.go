package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/inputcheck"
	"github.com/ultimat3/jobs/signals"
	"github.com/ultimat3/jobs/store"
)

// Client is the engine's API over HTTP. It implements frontend.Frontend (the worker protocol,
// msgpack), so a worker.Worker runs against a remote engine unchanged, and jobs.Enqueuer, so a
// typed job enqueues through it like through an in-process engine. Refusals come back as
// *jobs.Error with the engine's code.
type Client struct {
	base    string
	token   string
	http    *http.Client
	timeout time.Duration
	// records batches concurrent runs' records (client_records.go, WithRecordBatching); nil
	// sends each alone.
	records *recordBatcher
	// conns carries the worker protocol's hot calls on connections the caller reads itself
	// (client_conn.go); nil sends them through http.
	conns   *connPool
	netHTTP bool
	// frames carries records, heartbeats and history reads as frames on upgraded connections
	// (client_frames.go); nil sends them as plain requests (WithoutFrames).
	frames   *framePool
	noFrames bool
}

var (
	_ frontend.Frontend = (*Client)(nil)
	_ jobs.Enqueuer     = (*Client)(nil)
)

// ClientOption sets an optional field of a Client.
type ClientOption func(*Client)

// WithHTTPClient sends requests through hc. Optional: default a client whose transport keeps up
// to 64 idle connections to the engine (a worker's pollers, records and heartbeats run at once).
func WithHTTPClient(hc *http.Client) ClientOption { return func(c *Client) { c.http = hc } }

// WithRecordBatching sends the records that queue while two record requests are in flight
// together, in POST /v1/worker/records (client_records.go). Optional, off by default: measured
// with the engine's group commit on a loaded 2-core machine it cost throughput (see
// docs/architecture.md, "Throughput on the hot path").
func WithRecordBatching() ClientOption { return func(c *Client) { c.records = &recordBatcher{c: c} } }

// WithNetHTTP sends the worker protocol's polls, records, heartbeats and history reads through
// net/http's Transport like every other call, instead of on connections the calling goroutine
// reads itself (client_conn.go). Optional: the default is the latter for an http:// engine
// without WithHTTPClient.
func WithNetHTTP() ClientOption { return func(c *Client) { c.netHTTP = true } }

// WithoutFrames sends the worker's records, heartbeats and history reads as one request each on
// the client's own connections, instead of as frames on connections upgraded once to
// FramesProtocol (frames.go). Optional: frames are the default for an http:// engine without
// WithHTTPClient or WithNetHTTP, and an engine that does not serve the upgrade gets plain
// requests anyway.
func WithoutFrames() ClientOption { return func(c *Client) { c.noFrames = true } }

// WithTimeout bounds each call, and a long-poll beyond its wait. Optional: default 30s.
func WithTimeout(d time.Duration) ClientOption {
	return func(c *Client) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// NewClient returns a client of the engine at baseURL ("http://127.0.0.1:7233"), sending token
// as a bearer token when it is not empty. A token CheckToken refuses is refused with its error.
func NewClient(baseURL, token string, opts ...ClientOption) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "engine address %q: want http://host:port or https://host:port", baseURL)
	}
	// Refused here rather than at the first call: such a token cannot be sent, and every call
	// would fail as if the engine had not answered.
	if err := CheckToken(token); err != nil {
		return nil, err
	}
	c := &Client{base: strings.TrimRight(u.String(), "/"), token: token, timeout: 30 * time.Second}
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		if u.Scheme == "http" && !c.netHTTP {
			port := u.Port()
			if port == "" {
				port = "80"
			}
			c.conns = newConnPool(u.Hostname(), port)
			if !c.noFrames {
				c.frames = &framePool{conns: newConnPool(u.Hostname(), port), token: c.token}
			}
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		c.http = &http.Client{Transport: t}
	}
	return c, nil
}

// Close closes the idle connections the client keeps.
func (c *Client) Close() {
	c.http.CloseIdleConnections()
	if c.conns != nil {
		c.conns.close()
	}
	if c.frames != nil {
		c.frames.conns.close()
		c.frames.mux.close()
	}
}

// hotPath reports whether a worker protocol route goes on the client's own connections: the
// calls every run makes, not the session's hold nor the rare ones.
func hotPath(path string) bool {
	switch path {
	case "/v1/worker/poll", "/v1/worker/record", "/v1/worker/records", "/v1/worker/heartbeat", "/v1/worker/history":
		return true
	}
	return false
}

// The worker protocol.

// Poll implements frontend.Frontend.
func (c *Client) Poll(ctx context.Context, req frontend.PollRequest) ([]frontend.Task, error) {
	var out PollResponse
	// The server holds a long-poll for up to its wait: the call's own bound starts after it.
	err := c.callMsgpack(ctx, "/v1/worker/poll", req, &out, max(req.Wait, 0)+c.timeout, jobs.CodeStoreUnavailable)
	return out.Tasks, err
}

// Record implements frontend.Frontend. A record whose answer was lost may have landed: that is
// X_COMMIT_UNKNOWN, which the worker resends marked as a retry, and the engine settles by
// reading the history.
func (c *Client) Record(ctx context.Context, req frontend.RecordRequest) (frontend.RecordResponse, error) {
	if c.records != nil {
		return c.records.record(ctx, req)
	}
	return c.recordOne(ctx, req)
}

// recordOne sends one record in its own request.
func (c *Client) recordOne(ctx context.Context, req frontend.RecordRequest) (frontend.RecordResponse, error) {
	var out frontend.RecordResponse
	err := c.callMsgpack(ctx, "/v1/worker/record", req, &out, c.timeout, jobs.CodeCommitUnknown)
	return out, err
}

// Heartbeat implements frontend.Frontend.
func (c *Client) Heartbeat(ctx context.Context, req frontend.HeartbeatRequest) (frontend.HeartbeatResponse, error) {
	var out frontend.HeartbeatResponse
	err := c.callMsgpack(ctx, "/v1/worker/heartbeat", req, &out, c.timeout, jobs.CodeStoreUnavailable)
	return out, err
}

// History implements frontend.Frontend: the run's events after afterSeq.
func (c *Client) History(ctx context.Context, runID string, afterSeq int64) ([]history.Event, error) {
	var out HistoryResponse
	err := c.callMsgpack(ctx, "/v1/worker/history", HistoryRequest{RunID: runID, AfterSeq: afterSeq}, &out, c.timeout, jobs.CodeStoreUnavailable)
	return out.Events, err
}

// The admin API.

// Enqueue implements jobs.Enqueuer. The request travels as msgpack, so the input's bytes reach
// the worker exactly as the caller encoded them.
func (c *Client) Enqueue(ctx context.Context, req jobs.EnqueueRequest) (jobs.EnqueueResult, error) {
	var out jobs.EnqueueResult
	err := c.callMsgpack(ctx, "/v1/runs", req, &out, c.timeout, jobs.CodeStoreUnavailable)
	return out, err
}

// Publish encodes payload (jobs.Encode) and publishes it as the event name.
func (c *Client) Publish(ctx context.Context, name string, payload any) (signals.Published, error) {
	b, err := jobs.Encode(payload)
	if err != nil {
		return signals.Published{}, err
	}
	return c.PublishEvent(ctx, name, b)
}

// PublishEvent publishes an event whose payload is already msgpack.
func (c *Client) PublishEvent(ctx context.Context, name string, payload []byte) (signals.Published, error) {
	var out signals.Published
	resp, err := c.do(ctx, http.MethodPost, "/v1/events/"+pathSegment(name), nil, ContentMsgpack, payload, c.timeout, jobs.CodeStoreUnavailable)
	if err != nil {
		return out, err
	}
	return out, decodeAs(resp, &out)
}

// Cancel cancels a run; a finished run is refused with X_JOB_NOT_CANCELLABLE.
func (c *Client) Cancel(ctx context.Context, runID, reason string) (engine.RunSummary, error) {
	var out engine.RunSummary
	if err := inputcheck.RunID(runID); err != nil {
		return out, err
	}
	// JSON would carry invalid UTF-8 as U+FFFD: refuse it here, as the engine would.
	if err := checkText("reason", reason); err != nil {
		return out, err
	}
	err := c.callJSON(ctx, http.MethodPost, "/v1/runs/"+pathSegment(runID)+"/cancel", nil, CancelBody{Reason: reason}, &out)
	return out, err
}

// Retry reopens a dead-lettered or blocked run, from a step when req.FromStep is set.
func (c *Client) Retry(ctx context.Context, req engine.RetryRequest) (engine.RunSummary, error) {
	var out engine.RunSummary
	if err := inputcheck.RunID(req.RunID); err != nil {
		return out, err
	}
	for field, v := range map[string]string{"fromStep": req.FromStep, "by": req.By, "reason": req.Reason} {
		if err := checkText(field, v); err != nil {
			return out, err
		}
	}
	err := c.callJSON(ctx, http.MethodPost, "/v1/runs/"+pathSegment(req.RunID)+"/retry", nil,
		RetryBody{FromStep: req.FromStep, By: req.By, Reason: req.Reason}, &out)
	return out, err
}

// GetRun returns a run with its per-step trace.
func (c *Client) GetRun(ctx context.Context, runID string) (engine.RunView, error) {
	var out engine.RunView
	if err := inputcheck.RunID(runID); err != nil {
		return out, err
	}
	err := c.callJSON(ctx, http.MethodGet, "/v1/runs/"+pathSegment(runID), nil, nil, &out)
	return out, err
}

// ListRuns returns a page of runs, newest first; p.Before is the previous page's Next.
func (c *Client) ListRuns(ctx context.Context, p store.ListParams) (RunPage, error) {
	var out RunPage
	err := c.callJSON(ctx, http.MethodGet, "/v1/runs", listQuery(p, true), nil, &out)
	return out, err
}

// DeadLetters returns a page of dead-lettered runs, newest first.
func (c *Client) DeadLetters(ctx context.Context, p store.ListParams) (RunPage, error) {
	var out RunPage
	err := c.callJSON(ctx, http.MethodGet, "/v1/dead-letters", listQuery(p, false), nil, &out)
	return out, err
}

// Queues returns every queue's depth by state.
func (c *Client) Queues(ctx context.Context) ([]engine.QueueView, error) {
	var out QueueList
	err := c.callJSON(ctx, http.MethodGet, "/v1/queues", nil, nil, &out)
	return out.Queues, err
}

// Codes returns the engine's code registry.
func (c *Client) Codes(ctx context.Context) ([]jobs.CodeInfo, error) {
	var out CodeList
	err := c.callJSON(ctx, http.MethodGet, "/v1/codes", nil, nil, &out)
	return out.Codes, err
}

// DumpHistory writes a run's history to w in the dump format (JSON lines) that history.Load
// reads and replay.Check replays. The engine streams the dump, and it is copied to w as it
// arrives, so neither side holds the history whole. A refusal (an unknown run, another tenant's)
// writes nothing. A body cut short (the engine's store failed after the first page, and the
// engine cut the answer rather than end it as if whole; a connection lost) is
// X_STORE_UNAVAILABLE, with what arrived before already in w: a dump is whole only when the
// error is nil. An error of w's own is returned as it is.
//
// The client's timeout (WithTimeout) bounds the wait for the answer's headers, then each wait
// for more of the body, not the whole dump: a history of gigabytes takes as long as it takes,
// while an engine that sends nothing for the timeout is X_STORE_UNAVAILABLE.
func (c *Client) DumpHistory(ctx context.Context, runID string, w io.Writer) error {
	if err := inputcheck.RunID(runID); err != nil {
		return err
	}
	path := "/v1/runs/" + pathSegment(runID) + "/history"
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := &idleTimeout{d: c.timeout}
	idle.t = time.AfterFunc(c.timeout, func() { cancel(idle) })
	defer idle.t.Stop()
	req, err := c.request(ctx, callCtx, http.MethodGet, path, url.Values{"format": {"jsonl"}}, "", nil)
	if err != nil {
		return err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return c.lost(ctx, idle.of(callCtx, err), path, c.timeout, jobs.CodeStoreUnavailable)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		b, err := io.ReadAll(res.Body)
		if err != nil {
			return c.lost(ctx, idle.of(callCtx, err), path, c.timeout, jobs.CodeStoreUnavailable)
		}
		_, err = answer(res.StatusCode, res.Header, b)
		return err
	}
	body := &bodyReader{r: res.Body, read: idle.reset}
	n, err := io.Copy(w, body)
	if err == nil {
		return nil
	}
	if body.err == nil {
		return err // w's
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := idle.of(callCtx, body.err); errors.Is(err, context.DeadlineExceeded) {
		return jobs.Wrap(jobs.CodeStoreUnavailable, err, "the engine at %s sent nothing more of the history of run %s for %s, after %d bytes: the dump is incomplete", c.base, runID, c.timeout, n)
	}
	return jobs.Wrap(jobs.CodeStoreUnavailable, body.err, "the engine at %s cut the history of run %s short after %d bytes: the dump is incomplete", c.base, runID, n)
}

// idleTimeout is the cause a call is cancelled with when nothing of its answer arrived for d: the
// timer t, reset as each part of the body arrives, cancels it.
type idleTimeout struct {
	d time.Duration
	t *time.Timer
}

func (e *idleTimeout) Error() string {
	return fmt.Sprintf("nothing arrived for %s", e.d)
}

// Unwrap makes it a deadline passed (errors.Is(err, context.DeadlineExceeded)), as Client.lost
// reads one.
func (e *idleTimeout) Unwrap() error { return context.DeadlineExceeded }

func (e *idleTimeout) reset() { e.t.Reset(e.d) }

// of returns err, wrapped in e when e is why callCtx ended (net/http may return the context's
// own context.Canceled, not its cause).
func (e *idleTimeout) of(callCtx context.Context, err error) error {
	if context.Cause(callCtx) == error(e) && !errors.Is(err, e) {
		return fmt.Errorf("%w (%v)", e, err)
	}
	return err
}

// bodyReader keeps the error of a read of an answer's body (io.EOF aside), told apart from the
// error of the writer it is copied to. read, when set, is called after each read that returned
// bytes.
type bodyReader struct {
	r    io.Reader
	err  error
	read func()
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 && b.read != nil {
		b.read()
	}
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

// Ready returns nil when the engine answers /readyz with 200: it is up and its store answers.
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/readyz", nil, "", nil, c.timeout, jobs.CodeStoreUnavailable)
	return err
}

func listQuery(p store.ListParams, withState bool) url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("queue", p.Queue)
	if withState {
		set("state", string(p.State))
	}
	set("job", p.Job)
	set("tenant", p.Tenant)
	set("before", p.Before)
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	return q
}

// Transport.

type response struct {
	status      int
	contentType string
	body        []byte
}

func decodeAs(r response, v any) error {
	var err error
	switch {
	case strings.HasPrefix(r.contentType, ContentMsgpack):
		switch v := v.(type) {
		case *frontend.RecordResponse:
			// A step's answer and a poll's: their own codecs (recordcodec.go, pollcodec.go),
			// msgpack's result.
			err = decodeRecordResponse(r.body, v)
		case *PollResponse:
			err = decodePollResponse(r.body, v)
		default:
			err = slowDecode(r.body, v) // a malformed answer is an error, not a panic
		}
	case strings.HasPrefix(r.contentType, ContentJSON):
		err = json.Unmarshal(r.body, v)
	default:
		return notTheEngine(r)
	}
	if err != nil {
		return jobs.Wrap(jobs.CodeEncoding, err, "decode the engine's answer")
	}
	return nil
}

// notTheEngine is the error for a success whose body is neither msgpack nor JSON, the only types
// the engine answers a decoded call in: a web page, an empty body, text. Something other than the
// engine answered (a server at the wrong address, a login page a proxy redirected to), so the
// engine was not reached. X_ENCODING would say the engine's answer was garbled, a terminal
// refusal that an outbox relay sets its row aside for as the row's own fault; X_ENGINE_UNREACHABLE
// says what happened, and a worker retries it and a relay holds its rows in line.
func notTheEngine(r response) error {
	const hint = "the server does not answer as a jobs engine (is the address right?)"
	text := strings.Join(strings.Fields(string(r.body)), " ")
	switch {
	case strings.HasPrefix(r.contentType, "text/html") || strings.HasPrefix(text, "<"):
		return jobs.Errorf(jobs.CodeEngineUnreachable, "HTTP %d with a web page: %s", r.status, hint)
	case text == "":
		return jobs.Errorf(jobs.CodeEngineUnreachable, "HTTP %d with no body: %s", r.status, hint)
	}
	if len(text) > 200 {
		text = strings.ToValidUTF8(text[:200], "") + "…"
	}
	return jobs.Errorf(jobs.CodeEngineUnreachable, "HTTP %d with %q, not the engine's msgpack or JSON: %s: %s", r.status, r.contentType, hint, text)
}

func (c *Client) callMsgpack(ctx context.Context, path string, in, out any, timeout time.Duration, lost jobs.Code) error {
	// A traced call goes plain: a frame does not carry the caller's span.
	if route := frameRoute(path); c.frames != nil && route != 0 && !traced(ctx) {
		callCtx, cancel := context.WithTimeout(ctx, timeout)
		sent, err := c.frames.call(callCtx, route, in, out)
		cancel()
		if sent {
			var te errTransport
			if errors.As(err, &te) {
				return c.lost(ctx, te.err, path, timeout, lost)
			}
			return err
		}
	}
	b, err := encodeMsgpack(in)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodPost, path, nil, ContentMsgpack, b, timeout, lost)
	if err != nil {
		return err
	}
	return decodeAs(resp, out)
}

func (c *Client) callJSON(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body []byte
	ct := ""
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return jobs.Wrap(jobs.CodeEncoding, err, "encode the request")
		}
		ct = ContentJSON
	}
	// Reads are idempotent: a lost answer is simply unavailable. A lost answer to a write (a
	// cancel, a retry) is unknown too, and both are safe to send again.
	resp, err := c.do(ctx, method, path, query, ct, body, c.timeout, jobs.CodeStoreUnavailable)
	if err != nil {
		return err
	}
	return decodeAs(resp, out)
}

// do sends one request. A refusal becomes the *jobs.Error the engine sent; a call that got no
// answer becomes lost (X_COMMIT_UNKNOWN for a record, X_STORE_UNAVAILABLE otherwise: both
// retryable), except when the caller's own ctx ended, which is returned as ctx.Err() so that a
// stopping worker sees a cancellation, not an outage.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, contentType string, body []byte, timeout time.Duration, lost jobs.Code) (response, error) {
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if c.conns != nil && method == http.MethodPost && len(query) == 0 && hotPath(path) {
		// (Framed calls went before, in callMsgpack.)
		h := make(http.Header, 4)
		c.header(ctx, h, contentType)
		res, b, err := c.conns.roundTrip(callCtx, path, h, body)
		if err == nil {
			return answer(res.StatusCode, res.Header, b)
		}
		return response{}, c.lost(ctx, err, path, timeout, lost)
	}
	req, err := c.request(ctx, callCtx, method, path, query, contentType, body)
	if err != nil {
		return response{}, err
	}
	res, err := c.http.Do(req)
	if err == nil {
		var b []byte
		b, err = io.ReadAll(res.Body)
		res.Body.Close()
		if err == nil {
			return answer(res.StatusCode, res.Header, b)
		}
	}
	return response{}, c.lost(ctx, err, path, timeout, lost)
}

// request is a plain HTTP call of path and query on callCtx, with ctx's headers (header).
func (c *Client) request(ctx, callCtx context.Context, method, path string, query url.Values, contentType string, body []byte) (*http.Request, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(callCtx, method, u, rd)
	if err != nil {
		return nil, jobs.Wrap(jobs.CodeBadRequest, err, "build the request")
	}
	c.header(ctx, req.Header, contentType)
	return req, nil
}

// header sets a call's headers, whichever connection carries it: its body's type, the answer's
// type it accepts, the credential, and the caller's span (trace.go).
func (c *Client) header(ctx context.Context, h http.Header, contentType string) {
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	if contentType == ContentMsgpack {
		h.Set("Accept", ContentMsgpack)
	} else {
		h.Set("Accept", ContentJSON)
	}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	injectTrace(ctx, h)
}

// framedAnswer is the headers of every framed answer: msgpack, the refusal's delay in its body.
var framedAnswer = http.Header{"Content-Type": {ContentMsgpack}}

// answer is a call's answer: its body, or the refusal it carries.
func answer(status int, h http.Header, b []byte) (response, error) {
	ct := h.Get("Content-Type")
	if status/100 != 2 {
		return response{}, refusal(status, ct, h, b)
	}
	return response{status: status, contentType: ct, body: b}, nil
}

// lost classifies a call that got no answer.
func (c *Client) lost(ctx context.Context, err error, path string, timeout time.Duration, lost jobs.Code) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return jobs.Wrap(lost, err, "the engine at %s did not answer %s within %s", c.base, path, timeout)
	}
	if neverSent(err) {
		return jobs.Wrap(jobs.CodeEngineUnreachable, err, "cannot reach the engine at %s (is it running, and is --server right?)", c.base)
	}
	return jobs.Wrap(lost, err, "the engine at %s did not answer %s", c.base, path)
}

// refusal turns an error response back into the *jobs.Error the server wrote.
func refusal(status int, contentType string, h http.Header, body []byte) error {
	e := &jobs.Error{}
	switch {
	case strings.HasPrefix(contentType, ContentMsgpack):
		if slowDecode(body, e) != nil {
			e = &jobs.Error{}
		}
	case strings.HasPrefix(contentType, ContentJSON):
		var eb ErrorBody
		if json.Unmarshal(body, &eb) == nil && eb.Error != nil {
			e = eb.Error
		}
	}
	if e.Code == "" {
		// Not the engine's answer: a proxy's error page, another server at the address, a body
		// cut short. An HTML page is not worth printing; any other text is put on one line and
		// clipped.
		text := strings.Join(strings.Fields(string(body)), " ")
		switch {
		case strings.HasPrefix(contentType, "text/html") || strings.HasPrefix(text, "<"):
			e = jobs.Errorf(codeOfStatus(status), "HTTP %d with a web page: the server does not answer as a jobs engine (is the address right?)", status)
		case text == "":
			e = jobs.Errorf(codeOfStatus(status), "HTTP %d with no body: the server does not answer as a jobs engine (is the address right?)", status)
		default:
			if len(text) > 200 {
				text = strings.ToValidUTF8(text[:200], "") + "…"
			}
			e = jobs.Errorf(codeOfStatus(status), "HTTP %d: %s", status, text)
		}
	}
	if e.RetryAfter == 0 {
		e.RetryAfter = parseRetryAfter(h.Get("Retry-After"))
	}
	return e
}

// String names the engine the client talks to.
func (c *Client) String() string { return fmt.Sprintf("api.Client(%s)", c.base) }

// pathSegment escapes s as one segment of a route's path. A segment "." or ".." is sent as
// "%2E" and "%2E%2E": url.PathEscape leaves dots alone, and the server's router would resolve
// them as the path's own dot segments (a run "." read as the run listing, a schedule ".."
// answered as an unknown route) instead of as a name that does not exist.
func pathSegment(s string) string {
	switch s {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(s)
}
