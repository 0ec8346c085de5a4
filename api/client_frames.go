package api

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// The client's half of the framed worker calls (frames.go): a pool of connections upgraded to
// FramesProtocol, each used by one call at a time, as the plain connections of client_conn.go
// are. The same rules hold: a call that was written is never sent again by the client (its
// answer lost is X_COMMIT_UNKNOWN for a record, which the worker's marked resend settles); a
// kept connection the server closed while idle is seen by the peek and dropped first; the
// caller's context bounds the call and its cancellation cuts the connection.

// errNoFrames says a call could not go framed and was not sent: the caller sends it as a plain
// request.
var errNoFrames = errors.New("api: the engine does not serve framed calls")

// framePool keeps the client's upgraded connections to one engine.
type framePool struct {
	conns *connPool // dials, keeps and peeks at the connections
	token string
	// mux is the connection of version 2 (client_frames_mux.go), tried first; the pool above
	// serves version 1 when the engine does not serve version 2.
	mux muxClient
	// off is set once the upgrade was answered with anything but a switch or a refusal that
	// may pass (upgrade): an engine from before the route, whose calls all go plain from then on.
	off atomic.Bool
}

// call sends one framed call of in and decodes its answer into out. The request is encoded into
// a pooled buffer and the answer read into its connection's own, decoded before the connection
// goes back to the pool (decoding copies what it keeps): no buffer is made per call. sent is
// false when the call could not go framed and nothing of it was sent (errNoFrames): the caller
// sends it plain. Otherwise err is the engine's refusal, a decoding error, or the transport's
// (settled), which the caller classifies.
func (p *framePool) call(ctx context.Context, route byte, in, out any) (sent bool, err error) {
	bp := frameBufs.Get().(*[]byte)
	body, err := appendMsgpack((*bp)[:0], in)
	if cap(body) <= maxKeptAnswer {
		// A large record's buffer is not kept for the next.
		*bp = body[:0]
	}
	defer frameBufs.Put(bp)
	if err != nil {
		return true, err
	}
	var decoded error
	err = p.roundTrip(ctx, route, body, func(status int, b []byte) {
		resp, err := answer(status, framedAnswer, b)
		if err == nil {
			err = decodeAs(resp, out)
		}
		decoded = err
	})
	if err != nil {
		return !errors.Is(err, errNoFrames), errTransport{err}
	}
	return true, decoded
}

// errTransport is a framed call that got no answer: the caller classifies it as lost.
type errTransport struct{ err error }

func (e errTransport) Error() string { return e.err.Error() }
func (e errTransport) Unwrap() error { return e.err }

// frameBufs are the buffers framed calls are encoded into.
var frameBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// roundTrip sends one framed call and hands the answer's status and body to read, which must
// not keep the body: it is the connection's buffer, read into again by its next call.
func (p *framePool) roundTrip(ctx context.Context, route byte, body []byte, read func(status int, b []byte)) error {
	if p.off.Load() {
		return errNoFrames
	}
	err := p.muxRoundTrip(ctx, route, body, read)
	var lost errMuxLost
	if errors.As(err, &lost) && route != frameRoute("/v1/worker/record") && ctx.Err() == nil {
		// The connection failed under the call: most often the engine closed it (a drain, a
		// restart) as the call was sent. A poll, a heartbeat or a history read may be asked
		// again, once, on a new connection (which a draining engine refuses to upgrade, so it
		// goes plain and gets the engine's answer); a record is not sent twice by the client,
		// as in version 1: its answer lost is X_COMMIT_UNKNOWN, which the worker settles.
		err = p.muxRoundTrip(ctx, route, body, read)
	}
	if !errors.Is(err, errMuxOff) {
		return err
	}
	if route == routePoll {
		// A long-poll would hold a connection of version 1 and not end when its caller
		// leaves: it goes plain.
		return errNoFrames
	}
	for attempt := 0; ; attempt++ {
		err := p.roundTripOnce(ctx, route, body, read)
		if errors.Is(err, errIdleClosed) && attempt == 0 {
			continue
		}
		return err
	}
}

func (p *framePool) roundTripOnce(ctx context.Context, route byte, body []byte, read func(status int, b []byte)) error {
	wc, reused, err := p.conns.get(ctx)
	if err != nil {
		return err
	}
	stop := wc.bind(ctx)
	if !reused {
		if err = p.upgrade(wc, FramesProtocol); err != nil {
			stop()
			wc.Close()
			if errors.Is(err, errFramesOff) || errors.Is(err, errVersionOff) {
				p.off.Store(true)
			}
			if errors.Is(err, errNoFrames) || ctx.Err() == nil {
				// Not upgraded, nothing of the call sent: it goes plain. A connection that
				// could not be dialled or upgraded because of the engine's state says so again
				// on the plain request.
				return errNoFrames
			}
			return ctx.Err()
		}
	}
	status, b, err := wc.frame(route, body)
	if err := wc.settle(ctx, stop, reused, err); err != nil {
		return err
	}
	read(status, b)
	p.conns.put(wc)
	return nil
}

// errFramesOff is an upgrade the engine does not serve at all (errNoFrames too): the calls
// that would use it go another way from then on.
var errFramesOff = fmt.Errorf("%w: the upgrade is not served", errNoFrames)

// errVersionOff is an upgrade answered 400: the engine serves the route but not this version.
var errVersionOff = fmt.Errorf("%w: this version of the frames is not served", errNoFrames)

// upgrade asks for proto on a new connection: nil once switched, errNoFrames when the engine
// answered a refusal of this caller or of this moment, errFramesOff when it answered anything
// else (an engine from before the route or the version).
func (p *framePool) upgrade(wc *wireConn, proto string) error {
	bw := wc.bw
	bw.WriteString("POST " + framesPath + " HTTP/1.1\r\nHost: ")
	bw.WriteString(p.conns.host)
	bw.WriteString("\r\nContent-Length: 0\r\nContent-Type: " + ContentMsgpack + "\r\nAccept: " + ContentMsgpack +
		"\r\nConnection: Upgrade\r\nUpgrade: " + proto + "\r\n")
	if p.token != "" {
		bw.WriteString("Authorization: Bearer ")
		bw.WriteString(p.token)
		bw.WriteString("\r\n")
	}
	bw.WriteString("\r\n")
	if err := bw.Flush(); err != nil {
		return err
	}
	res, err := http.ReadResponse(wc.br, nil)
	if err != nil {
		return err
	}
	if res.StatusCode == http.StatusSwitchingProtocols && res.Header.Get("Upgrade") == proto {
		return nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<16))
	res.Body.Close()
	switch res.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests, http.StatusServiceUnavailable:
		// The engine's refusal of this caller or of this moment (a draining engine): the plain
		// request gets the same, and a later upgrade may be served.
	case http.StatusBadRequest:
		// An engine from before this version (jobs-frames/2 on an engine of version 1 only).
		return errVersionOff
	default:
		// An engine from before the route (404), or something between that does not pass the
		// upgrade on.
		return errFramesOff
	}
	return errNoFrames
}

// frame writes one call and reads its answer.
func (wc *wireConn) frame(route byte, body []byte) (int, []byte, error) {
	var head [frameCallHeader]byte
	binary.BigEndian.PutUint32(head[:4], uint32(len(body)))
	head[4] = route
	wc.bw.Write(head[:])
	wc.bw.Write(body)
	if err := wc.bw.Flush(); err != nil {
		// Not all of the frame reached the engine, which serves only whole frames.
		return 0, nil, errors.Join(errIdleClosed, err)
	}
	var ah [frameAnswerHeader]byte
	if _, err := io.ReadFull(wc.br, ah[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(ah[:4])
	if n > maxFrameAnswer {
		return 0, nil, fmt.Errorf("api: a framed answer of %d bytes is over the limit of %d", n, maxFrameAnswer)
	}
	var b []byte
	switch {
	case n > maxKeptAnswer:
		// A long history: not kept for the connection's life.
		b = make([]byte, n)
	case cap(wc.ans) < int(n):
		wc.ans = make([]byte, n, max(n, 4096))
		b = wc.ans
	default:
		b = wc.ans[:n]
	}
	if _, err := io.ReadFull(wc.br, b); err != nil {
		return 0, nil, err
	}
	return int(binary.BigEndian.Uint16(ah[4:])), b, nil
}

// maxKeptAnswer bounds the buffers kept between calls: a connection's answer buffer and the
// pooled request buffers.
const maxKeptAnswer = 64 << 10

// maxFrameAnswer bounds what the client reads for one framed answer: a history read is the
// largest, and the engine's answers are far under it.
const maxFrameAnswer = 256 << 20
