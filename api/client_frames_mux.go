package api

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// The client's half of the multiplexed framed calls (frames_mux.go): one connection to the
// engine upgraded to FramesProtocolMux, every framed call of the client on it at once. A caller
// queues its frame and writes it unless another caller is writing (who then writes it with its
// own, in one write); one reader goroutine per connection reads the answers and hands each to
// its caller by id. The rules of version 1 hold: a call that was written is never sent again by
// the client (its answer lost is X_COMMIT_UNKNOWN for a record); the caller's context bounds its
// wait. What differs: a caller that stops waiting leaves the connection to the others (its
// answer, when it comes, is dropped), and a connection unused for idleFor is replaced before a
// call rather than peeked at, so that the engine's idle close never meets a call.

// errMuxOff says the engine does not serve version 2: the call goes by version 1.
var errMuxOff = errors.New("api: the engine does not serve multiplexed frames")

// errMuxLost is a call whose connection failed before its answer came.
type errMuxLost struct{ err error }

func (e errMuxLost) Error() string { return e.err.Error() }
func (e errMuxLost) Unwrap() error { return e.err }

// muxClient is the client's multiplexed connection, or the lack of one.
type muxClient struct {
	mu   sync.Mutex
	conn *muxConn
	// dialing is closed when the dial under way ends; nil when none is.
	dialing chan struct{}
	// off is set once an engine answered the upgrade to version 2 with anything but a switch or
	// a refusal that may pass: the calls go by version 1 (or plain) from then on.
	off bool
}

// muxConn is one multiplexed connection.
type muxConn struct {
	wc *wireConn

	out coalescer

	mu       sync.Mutex
	calls    map[uint32]*muxCall
	next     uint32
	polls    int   // the polls sent and neither answered nor cancelled (muxMaxPolls)
	err      error // set once the connection failed: every call from then on fails with it
	lastUsed time.Time
}

// muxCall is one call waiting for its answer.
type muxCall struct {
	done   chan struct{}
	status int
	b      *[]byte
}

var muxCalls = sync.Pool{New: func() any { return &muxCall{done: make(chan struct{}, 1)} }}

// muxAnswers are the buffers the reader reads answers into; the caller puts one back once it
// decoded it.
var muxAnswers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// muxRoundTrip sends one call on the multiplexed connection and hands its answer to read (which
// must not keep the body). errNoFrames says the engine does not serve version 2 and nothing was
// sent: the caller tries version 1.
func (p *framePool) muxRoundTrip(ctx context.Context, route byte, body []byte, read func(status int, b []byte)) error {
	mc, err := p.muxConnect(ctx)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	call := muxCalls.Get().(*muxCall)
	mc.mu.Lock()
	if mc.err != nil {
		err := mc.err
		mc.mu.Unlock()
		muxCalls.Put(call)
		return err
	}
	if route == routePoll {
		if mc.polls >= muxMaxPolls {
			// The engine serves no more polls waiting on one connection (frames_mux.go): this
			// one goes plain, as on an engine without frames, rather than be refused.
			mc.mu.Unlock()
			muxCalls.Put(call)
			return errNoFrames
		}
		// Counted until its answer comes or its cancel is sent, as the engine counts it.
		mc.polls++
		defer func() {
			mc.mu.Lock()
			mc.polls--
			mc.mu.Unlock()
		}()
	}
	mc.next++
	id := mc.next
	mc.calls[id] = call
	mc.lastUsed = time.Now()
	mc.mu.Unlock()

	var head [muxCallHeader]byte
	binary.BigEndian.PutUint32(head[:4], uint32(len(body)))
	head[4] = route
	binary.BigEndian.PutUint32(head[5:], id)
	mc.write(head[:], body)

	select {
	case <-call.done:
	case <-ctx.Done():
		mc.mu.Lock()
		_, waiting := mc.calls[id]
		delete(mc.calls, id)
		mc.mu.Unlock()
		if waiting {
			// Its answer, if it comes, is dropped by the reader; the call is not reused, as
			// nothing will be sent on its channel. A poll is ended on the engine too, as a
			// plain one is by its connection's close: runs it claims after this are handed
			// back rather than left to their lease.
			if route == routePoll {
				var cancel [muxCallHeader]byte
				cancel[4] = muxCancel
				binary.BigEndian.PutUint32(cancel[5:], id)
				mc.write(cancel[:], nil)
			}
			return ctx.Err()
		}
		// The answer (or the connection's failure) came as the context ended.
		<-call.done
	}
	status, b := call.status, call.b
	call.status, call.b = 0, nil
	muxCalls.Put(call)
	if b == nil {
		mc.mu.Lock()
		err := mc.err
		mc.mu.Unlock()
		return errMuxLost{err}
	}
	read(status, *b)
	if cap(*b) <= maxKeptAnswer {
		muxAnswers.Put(b)
	}
	return nil
}

// write queues a frame and writes it unless another caller is writing (coalescer); a failed
// write fails the connection: the calls written or not fail together.
func (mc *muxConn) write(head, body []byte) {
	if err := mc.out.write(head, body); err != nil {
		mc.fail(err)
	}
}

// muxWriteTimeout bounds one write of queued frames: an engine that reads nothing for this long
// is taken as gone.
const muxWriteTimeout = 30 * time.Second

// fail ends the connection: every call waiting, and every call after, fails with err.
func (mc *muxConn) fail(err error) {
	mc.mu.Lock()
	if mc.err == nil {
		mc.err = err
	}
	calls := mc.calls
	mc.calls = map[uint32]*muxCall{}
	mc.mu.Unlock()
	_ = mc.wc.Close()
	for _, c := range calls {
		c.done <- struct{}{}
	}
}

// readLoop hands the answers to their callers until the connection ends.
func (mc *muxConn) readLoop() {
	for {
		var head [muxAnswerHeader]byte
		if _, err := io.ReadFull(mc.wc.br, head[:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			mc.fail(err)
			return
		}
		n, status, id := binary.BigEndian.Uint32(head[:4]), binary.BigEndian.Uint16(head[4:6]), binary.BigEndian.Uint32(head[6:])
		if n > maxFrameAnswer {
			mc.fail(fmt.Errorf("api: a framed answer of %d bytes is over the limit of %d", n, maxFrameAnswer))
			return
		}
		b := muxAnswers.Get().(*[]byte)
		if cap(*b) < int(n) {
			*b = make([]byte, n)
		}
		*b = (*b)[:n]
		if _, err := io.ReadFull(mc.wc.br, *b); err != nil {
			mc.fail(err)
			return
		}
		mc.mu.Lock()
		call := mc.calls[id]
		delete(mc.calls, id)
		mc.mu.Unlock()
		if call == nil {
			// Its caller stopped waiting.
			muxAnswers.Put(b)
			continue
		}
		call.status, call.b = int(status), b
		call.done <- struct{}{}
	}
}

// muxConnect returns the multiplexed connection, dialling and upgrading one when there is none
// (or the last failed, or was idle long enough that the engine may be closing it). One caller
// dials at a time; the others wait for it, each no longer than its own context allows.
func (p *framePool) muxConnect(ctx context.Context) (*muxConn, error) {
	m := &p.mux
	for {
		m.mu.Lock()
		if m.off {
			m.mu.Unlock()
			return nil, errMuxOff
		}
		if mc := m.conn; mc != nil {
			mc.mu.Lock()
			ok := mc.err == nil && (len(mc.calls) > 0 || time.Since(mc.lastUsed) < idleFor)
			mc.mu.Unlock()
			if ok {
				m.mu.Unlock()
				return mc, nil
			}
			mc.fail(errIdleClosed)
			m.conn = nil
		}
		if wait := m.dialing; wait != nil {
			m.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		m.dialing = make(chan struct{})
		m.mu.Unlock()
		mc, err := p.muxDial(ctx)
		m.mu.Lock()
		m.conn = mc
		close(m.dialing)
		m.dialing = nil
		m.mu.Unlock()
		if err != nil {
			return nil, err
		}
		go mc.readLoop()
		return mc, nil
	}
}

// muxDial dials and upgrades a connection to version 2.
func (p *framePool) muxDial(ctx context.Context) (*muxConn, error) {
	c, err := p.conns.dialer.DialContext(ctx, "tcp", p.conns.addr)
	if err != nil {
		return nil, err
	}
	wc := &wireConn{Conn: c, br: bufio.NewReaderSize(c, 16<<10), bw: bufio.NewWriterSize(c, 1024)}
	stop := wc.bind(ctx)
	err = p.upgrade(wc, FramesProtocolMux)
	if !stop() || ctx.Err() != nil {
		wc.Close()
		return nil, ctx.Err()
	}
	_ = wc.SetDeadline(time.Time{})
	if err != nil {
		wc.Close()
		switch {
		case errors.Is(err, errVersionOff):
			// Version 1 may be served: the pool of version 1 asks.
			p.mux.mu.Lock()
			p.mux.off = true
			p.mux.mu.Unlock()
			return nil, errMuxOff
		case errors.Is(err, errFramesOff):
			// No frames at all: neither version is asked for again.
			p.mux.mu.Lock()
			p.mux.off = true
			p.mux.mu.Unlock()
			p.off.Store(true)
		}
		return nil, errNoFrames
	}
	return &muxConn{wc: wc, out: coalescer{conn: wc, timeout: muxWriteTimeout}, calls: map[uint32]*muxCall{},
		lastUsed: time.Now()}, nil
}

// close closes the multiplexed connection; calls waiting on it fail.
func (m *muxClient) close() {
	m.mu.Lock()
	mc := m.conn
	m.conn = nil
	m.mu.Unlock()
	if mc != nil {
		mc.fail(errors.New("api: the client was closed"))
	}
}
