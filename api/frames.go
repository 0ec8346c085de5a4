package api

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"time"

	"github.com/ultimat3/jobs"
)

// Framed worker calls: the step record (and the heartbeat and history read beside it) on a
// connection upgraded once from HTTP/1.1, each call one length-prefixed frame each way.
//
// Why: a remote step waits for its record's answer, and measured on the loaded 2-core machine
// the engine's process spent about as much CPU in net/http around a record (reading and parsing
// its headers, the ServeMux matched twice, the middleware chain, the background read net/http
// starts for every request and stops, with a goroutine hand-off, before it answers) as in the
// record itself. On an upgraded connection the credential, the Origin and address rules and the
// route are checked once, at the upgrade, by the same middleware as any request; each call after
// it is a read of its frame, the route's own handler (the same checks, the same refusals) and a
// write of the answer, on the connection's goroutine.
//
// The wire, version 1 (Upgrade: jobs-frames/1, POST /v1/worker/frames):
//
//	call:   u32 body length, u8 route (frameRoutes), body (the route's msgpack request)
//	answer: u32 body length, u16 HTTP status, body (the route's msgpack answer, or its refusal)
//
// Calls on one connection are sequential: the client sends the next frame once the previous
// answer is read. An engine without the route answers the upgrade 404, and the client sends
// those calls as plain requests again (client_frames.go), so old and new mix freely.
//
// What a plain request has and a frame does not: the server does not watch a framed call for the
// client leaving (no background read), which the record does not need (its commit goes on
// regardless, and the engine settles a lost answer by the resend), and the caller's span is not
// carried, so the client sends a traced call as a plain request. Polls stay plain requests: a
// long-poll must end when its worker leaves.

// FramesProtocol is the Upgrade token of the framed worker calls.
const FramesProtocol = "jobs-frames/1"

// framesPath is the route that upgrades a connection to frames.
const framesPath = "/v1/worker/frames"

// frameRoutes are the routes a frame may name, by their number on the wire. The numbers are
// the protocol: never reuse one.
var frameRoutes = [...]string{1: "/v1/worker/record", 2: "/v1/worker/heartbeat", 3: "/v1/worker/history", routePoll: "/v1/worker/poll"}

// routePoll is the poll's route number: served on multiplexed connections only (frames_mux.go),
// where a long-poll does not hold up the connection's other calls and ends when its caller
// leaves.
const routePoll = 4

// frameRoute is the number of a route that may be framed, or 0.
func frameRoute(path string) byte {
	for i, p := range frameRoutes {
		if p != "" && p == path {
			return byte(i)
		}
	}
	return 0
}

const (
	frameCallHeader   = 5 // u32 length, u8 route
	frameAnswerHeader = 6 // u32 length, u16 status
)

// frames upgrades the connection and serves its framed calls until the client closes it, it
// stays idle past the server's idle timeout, or the server drains.
func (s *Server) frames(w http.ResponseWriter, r *http.Request) error {
	proto := r.Header.Get("Upgrade")
	if proto != FramesProtocol && proto != FramesProtocolMux {
		return jobs.Errorf(jobs.CodeBadRequest, "%s upgrades a connection: want Upgrade: %s or %s", framesPath, FramesProtocolMux, FramesProtocol)
	}
	if r.ContentLength != 0 {
		// Its bytes would be read as the first frame.
		return jobs.Errorf(jobs.CodeBadRequest, "the upgrade to %s carries no body", FramesProtocol)
	}
	if s.drainCtx.Err() != nil {
		return jobs.Errorf(jobs.CodeDraining, "the engine is shutting down")
	}
	routes := make([]func(http.ResponseWriter, *http.Request) error, len(frameRoutes))
	reqs := make([]*http.Request, len(frameRoutes))
	for i, p := range frameRoutes {
		switch p {
		case "/v1/worker/record":
			routes[i] = s.record
		case "/v1/worker/heartbeat":
			routes[i] = s.heartbeat
		case "/v1/worker/history":
			routes[i] = s.workerHistory
		case "/v1/worker/poll":
			if proto == FramesProtocolMux {
				routes[i] = s.poll
			}
		}
		if routes[i] != nil {
			// The request each of the route's calls is served as: the upgrade's context and
			// headers, the route's path; a call sets its body. Made once per connection, as a
			// call's handler keeps nothing of it once it answered.
			reqs[i] = r.WithContext(r.Context())
			reqs[i].URL = &url.URL{Path: p}
		}
	}
	// Counted before the hijack: until then Shutdown waits for this request, so Stop's wait for
	// the upgraded connections cannot begin before it is counted.
	s.framing.Add(1)
	defer s.framing.Done()
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return jobs.Wrap(jobs.CodeBadRequest, err, "this connection cannot be upgraded")
	}
	defer conn.Close()
	// net/http's read and write deadlines were the upgrade request's.
	_ = conn.SetDeadline(time.Time{})
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + proto + "\r\n\r\n")
	if brw.Flush() != nil {
		return nil
	}
	// A drain ends the connection between calls: an idle read is cut at once, a call in
	// progress is answered first.
	draining := false
	stop := context.AfterFunc(s.drainCtx, func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	fc := &frameConn{s: s, r: r, br: brw.Reader, bw: brw.Writer, conn: conn, routes: routes, reqs: reqs}
	if proto == FramesProtocolMux {
		fc.serveMux()
		return nil
	}
	for !draining {
		if !fc.serveOne() {
			return nil
		}
		draining = s.drainCtx.Err() != nil
	}
	return nil
}

// frameConn is one upgraded connection on the server.
type frameConn struct {
	s      *Server
	r      *http.Request // the upgrade: its context (the credential) and headers serve every call
	br     *bufio.Reader
	bw     *bufio.Writer
	conn   net.Conn
	routes []func(http.ResponseWriter, *http.Request) error
	reqs   []*http.Request // by route: what its handler is given (frames)
	fb     frameBody
	body   []byte
	out    frameWriter
	// The connection's deadlines, set again only when they drew near rather than twice per
	// call: each set is a lock and a timer reset in the runtime's poller, a few percent of
	// the engine's CPU at a record per 50 µs. idleSet is when the idle read deadline was set
	// (zero once a body's shorter one replaced it); writeUntil the write deadline.
	idleSet    time.Time
	writeUntil time.Time
}

// idleSlack is how stale the idle read deadline may get before a call sets it again: a
// connection is closed after between serverIdleTimeout-idleSlack and serverIdleTimeout idle.
const idleSlack = time.Second

// frameBody is a framed call's body: the bytes already read, which readMsgpack decodes in
// place; a handler that reads the body as a stream gets them too.
type frameBody struct {
	b   []byte
	off int
}

func (b *frameBody) Read(p []byte) (int, error) {
	if b.off >= len(b.b) {
		return 0, io.EOF
	}
	n := copy(p, b.b[b.off:])
	b.off += n
	return n, nil
}

func (b *frameBody) Close() error { return nil }

// serveOne reads one call and answers it; false ends the connection.
func (fc *frameConn) serveOne() (ok bool) {
	s := fc.s
	if now := time.Now(); now.Sub(fc.idleSet) > idleSlack {
		_ = fc.conn.SetReadDeadline(now.Add(serverIdleTimeout))
		fc.idleSet = now
	}
	if s.drainCtx.Err() != nil {
		// The drain's cut may have come before the deadline above replaced it.
		return false
	}
	var head [frameCallHeader]byte
	if _, err := io.ReadFull(fc.br, head[:]); err != nil {
		return false
	}
	n, route := binary.BigEndian.Uint32(head[:4]), head[4]
	if int64(n) > s.cfg.MaxBody {
		// The rest of the stream cannot be trusted to be read past: answer, then close.
		fc.answer(fc.r, jobs.Errorf(jobs.CodePayloadTooLarge, "the request body is over the limit of %d bytes", s.cfg.MaxBody), nil)
		return false
	}
	if fc.br.Buffered() < int(n) {
		// The body is still coming: it has BodyTimeout to arrive, as a plain request's has.
		// (The next call's read sets the idle deadline again.)
		_ = fc.conn.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
		fc.idleSet = time.Time{}
	}
	if cap(fc.body) < int(n) {
		fc.body = make([]byte, n)
	}
	fc.body = fc.body[:n]
	if _, err := io.ReadFull(fc.br, fc.body); err != nil {
		return false
	}
	if int(route) >= len(fc.routes) || fc.routes[route] == nil {
		fc.answer(fc.r, jobs.Errorf(jobs.CodeBadRequest, "frame names route %d, which this engine does not serve framed", route), nil)
		return true
	}
	// The route's handler sees the request it would have seen on its own: the upgrade's
	// context and headers, its own path and this frame's body.
	r := fc.reqs[route]
	fc.fb = frameBody{b: fc.body}
	r.Body = &fc.fb
	r.ContentLength = int64(n)
	fc.out.reset()
	err := fc.callOn(route, &fc.out, r)
	return fc.answer(r, err, &fc.out)
}

// callOn runs a route's handler, turning a panic into a logged X_INTERNAL as the recover
// middleware does for a plain request.
func (fc *frameConn) callOn(route byte, w *frameWriter, r *http.Request) (err error) {
	defer func() {
		if v := recover(); v != nil {
			fc.s.log.Error("jobs.api.panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			err = jobs.Errorf(jobs.CodeInternal, "internal error; the engine logged it")
		}
	}()
	return fc.routes[route](w, r)
}

// answerOf is a call's answer and its status: the handler's, or err's refusal in msgpack.
func (fc *frameConn) answerOf(r *http.Request, err error, out *frameWriter) (*frameWriter, int) {
	if err != nil {
		var ew frameWriter
		fc.s.writeError(&ew, r, err)
		out = &ew
	}
	if out.status == 0 {
		return out, http.StatusOK
	}
	return out, out.status
}

// answer writes a call's answer: the handler's, or err's refusal in msgpack.
func (fc *frameConn) answer(r *http.Request, err error, out *frameWriter) bool {
	out, status := fc.answerOf(r, err, out)
	var head [frameAnswerHeader]byte
	binary.BigEndian.PutUint32(head[:4], uint32(len(out.buf)))
	binary.BigEndian.PutUint16(head[4:], uint16(status))
	// An answer has at least half of BodyTimeout to be written; the deadline stays set while
	// the connection waits for its next call, which a read does not see.
	if now := time.Now(); fc.writeUntil.Sub(now) < fc.s.cfg.BodyTimeout/2 {
		fc.writeUntil = now.Add(fc.s.cfg.BodyTimeout)
		_ = fc.conn.SetWriteDeadline(fc.writeUntil)
	}
	fc.bw.Write(head[:])
	fc.bw.Write(out.buf)
	return fc.bw.Flush() == nil
}

// frameWriter is the http.ResponseWriter a framed call's handler writes to.
type frameWriter struct {
	h      http.Header
	status int
	buf    []byte
}

func (w *frameWriter) reset() {
	w.status, w.buf = 0, w.buf[:0]
	if len(w.h) > 0 {
		clear(w.h)
	}
}

// writeMsgpack is writeMsgpack's for a framed answer: no header (a frame has none), v encoded
// straight into the answer's buffer.
func (w *frameWriter) writeMsgpack(v any) error {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	var err error
	w.buf, err = appendMsgpack(w.buf, v)
	return err
}

func (w *frameWriter) Header() http.Header {
	if w.h == nil {
		w.h = make(http.Header, 2)
	}
	return w.h
}

func (w *frameWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *frameWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.buf = append(w.buf, b...)
	return len(b), nil
}
