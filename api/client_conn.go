package api

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// The worker protocol's calls (a poll, a record, a heartbeat, a history read) are many, small and
// on the critical path of every step: a step's body waits for its record's answer. net/http's
// Transport hands each request to a connection's writer goroutine and its answer back from the
// connection's reader goroutine, so every call wakes three goroutines in turn (and, on a loaded
// machine, the threads under them). A connection of the pool below is used by the calling
// goroutine alone: it writes the request and reads the answer itself, so a call costs one wake-up
// (the answer's arrival). The requests are plain HTTP/1.1 on kept-alive connections, exactly what
// the server already serves; only the client's plumbing differs. It is used for http:// engines
// when no http.Client was given (WithHTTPClient), and turned off by WithNetHTTP.

const (
	// maxIdleConns bounds the connections kept open between calls (a worker's pollers, records
	// and heartbeats run at once).
	maxIdleConns = 64
	// idleFor is how long an unused connection is kept: well under the server's IdleTimeout
	// (2 minutes), so a kept connection is not one the server is closing as it is reused.
	idleFor = 30 * time.Second
)

// connPool keeps the client's open connections to one engine.
type connPool struct {
	host   string // the Host header: host[:port] as the base URL names it
	addr   string // what is dialled: host:port
	dialer net.Dialer

	mu   sync.Mutex
	idle []*wireConn
}

// wireConn is one kept-alive connection.
type wireConn struct {
	net.Conn
	br       *bufio.Reader
	bw       *bufio.Writer
	lastUsed time.Time
	// ans is the last framed answer's buffer (client_frames.go), kept for the next.
	ans []byte
}

func newConnPool(host, port string) *connPool {
	return &connPool{host: net.JoinHostPort(host, port), addr: net.JoinHostPort(host, port),
		dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}
}

// get returns an idle connection, or dials a new one. reused says which.
func (p *connPool) get(ctx context.Context) (wc *wireConn, reused bool, err error) {
	now := time.Now()
	p.mu.Lock()
	for len(p.idle) > 0 {
		wc = p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if now.Sub(wc.lastUsed) < idleFor && wc.br.Buffered() == 0 {
			p.mu.Unlock()
			if alive(wc.Conn) {
				return wc, true, nil
			}
			wc.Close()
			p.mu.Lock()
			continue
		}
		wc.Close()
	}
	p.mu.Unlock()
	c, err := p.dialer.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, false, err
	}
	return &wireConn{Conn: c, br: bufio.NewReaderSize(c, 4096), bw: bufio.NewWriterSize(c, 4096)}, false, nil
}

// put keeps wc for the next call, or closes it when enough are kept.
func (p *connPool) put(wc *wireConn) {
	// The call's deadline goes with the call: a kept connection has none (alive peeks at it).
	_ = wc.SetDeadline(time.Time{})
	wc.lastUsed = time.Now()
	p.mu.Lock()
	if len(p.idle) < maxIdleConns {
		p.idle = append(p.idle, wc)
		wc = nil
	}
	p.mu.Unlock()
	if wc != nil {
		wc.Close()
	}
}

// close closes the idle connections.
func (p *connPool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, wc := range idle {
		wc.Close()
	}
}

// errIdleClosed is a kept connection that could not be written to: the server had closed it, and
// a request cut short there was never served (its body was incomplete), so it is sent again on
// a new connection. Once written, a request is never sent again here: an answer lost after that
// may follow a commit, and only the caller knows how to ask again (a record's resend is marked
// as a retry), exactly as with net/http, which does not resend a POST either.
var errIdleClosed = errors.New("api: kept connection closed by the server")

// roundTrip sends one POST with body and returns the answer's status, headers and body. Its
// errors are what net/http's would be for the same failure (a *net.OpError "dial" when the
// engine cannot be reached, context.DeadlineExceeded when ctx's deadline passed), so do
// classifies them alike.
func (p *connPool) roundTrip(ctx context.Context, path string, h http.Header, body []byte) (*http.Response, []byte, error) {
	for attempt := 0; ; attempt++ {
		res, b, err := p.roundTripOnce(ctx, path, h, body)
		if errors.Is(err, errIdleClosed) && attempt == 0 {
			continue
		}
		return res, b, err
	}
}

func (p *connPool) roundTripOnce(ctx context.Context, path string, h http.Header, body []byte) (*http.Response, []byte, error) {
	wc, reused, err := p.get(ctx)
	if err != nil {
		return nil, nil, err
	}
	stop := wc.bind(ctx)
	res, b, err := wc.exchange(p.host, path, h, body)
	if err := wc.settle(ctx, stop, reused, err); err != nil {
		return nil, nil, err
	}
	if res.Close {
		wc.Close()
	} else {
		p.put(wc)
	}
	return res, b, nil
}

// bind makes ctx end the call on wc: its deadline is the connection's, its cancellation cuts the
// connection short (the engine sees the client leave, as with net/http). The returned stop
// unbinds it, as context.AfterFunc's does.
func (wc *wireConn) bind(ctx context.Context) (stop func() bool) {
	if d, ok := ctx.Deadline(); ok {
		_ = wc.SetDeadline(d)
	} else {
		_ = wc.SetDeadline(time.Time{})
	}
	return context.AfterFunc(ctx, func() { _ = wc.SetDeadline(time.Unix(1, 0)) })
}

// settle ends a call bound by bind: nil when it went through (wc may be kept), else the error the
// caller sees, with wc closed. ctx's end wins over the connection's error it caused; a kept
// connection found closed before anything was read is errIdleClosed (the call may go again on a
// new one), a new one io.ErrUnexpectedEOF.
func (wc *wireConn) settle(ctx context.Context, stop func() bool, reused bool, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The connection's deadline is ctx's, which may pass a moment before ctx says so.
		<-ctx.Done()
	}
	if !stop() || ctx.Err() != nil {
		wc.Close()
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return err
	}
	if err != nil {
		wc.Close()
		if errors.Is(err, errIdleClosed) {
			if reused {
				return errIdleClosed
			}
			return io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

// exchange writes the request and reads the whole answer.
func (wc *wireConn) exchange(host, path string, h http.Header, body []byte) (*http.Response, []byte, error) {
	bw := wc.bw
	bw.WriteString("POST ")
	bw.WriteString(path)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\nContent-Length: ")
	bw.WriteString(strconv.Itoa(len(body)))
	bw.WriteString("\r\n")
	if err := h.Write(bw); err != nil {
		return nil, nil, err
	}
	bw.WriteString("\r\n")
	bw.Write(body)
	if werr := bw.Flush(); werr != nil {
		// The server may have answered before it stopped reading (a body over its limit is
		// refused with 413 and the connection closed): that answer is the call's.
		res, b, err := wc.read()
		if err != nil {
			return nil, nil, errors.Join(errIdleClosed, werr)
		}
		res.Close = true
		return res, b, nil
	}
	return wc.read()
}

// read reads one whole answer.
func (wc *wireConn) read() (*http.Response, []byte, error) {
	res, err := http.ReadResponse(wc.br, nil)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, nil, err
	}
	return res, b, nil
}
