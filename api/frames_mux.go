package api

import (
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/ultimat3/jobs"
)

// Multiplexed framed calls, version 2 of the framed wire (Upgrade: jobs-frames/2, the same
// route as version 1): several calls in flight on one connection, each frame carrying the id
// its caller chose, answers in the order they are ready.
//
// Why: in version 1 a connection carries one call at a time, so a worker with 16 slots keeps up
// to 16 connections and the engine writes each answer with its own write syscall, even when one
// group commit released 14 of them at once; measured, those writes were about 15% of the
// engine's CPU in the ten-step pass. Here a worker keeps one connection, and the answers that
// are ready together go in one write: the first ready answer is written at once by its own
// goroutine, and whatever became ready while that write was in the kernel is written by the
// same goroutine right after, in one write. No answer waits for another to be ready. The
// worker's side writes its calls the same way, and one reader goroutine there hands each answer
// to its caller.
//
// The wire:
//
//	call:   u32 body length, u8 route (frameRoutes), u32 call id, body
//	answer: u32 body length, u16 HTTP status, u32 call id, body
//
// The ids are the client's: the engine only echoes them. Each call is served by the route's
// handler, with the same checks and refusals as version 1 and as a plain request, on one of the
// connection's server goroutines; at most muxInFlight calls of one connection are served at
// once, after which the engine stops reading the connection until one is answered. A frame over
// the body limit is answered 413 and ends the connection once the calls in flight are answered,
// as does a drain or the idle timeout; an unknown route is answered 400 and the connection goes
// on.
//
// Polls are framed here too (routePoll, refused on version 1): a long-poll holds only its own
// goroutine, not the connection. A plain poll ends when its client leaves, which net/http sees
// as the connection closing; a framed one ends when its connection ends (the read loop sees the
// client leave) or when the client sends a cancel frame (muxCancel) for its id, which the client
// does when its caller stops waiting. Runs claimed after that are handed back, as for a plain
// poll.
//
// A waiting poll is not one of the muxInFlight calls: each has a goroutine of its own, and a
// connection has at most muxMaxPolls of them waiting (a poll past that is refused X_OVERLOADED;
// the client sends its polls past it plain, so it never meets the refusal). Counted among the
// other calls, as they were, 256 polls waiting stopped the engine reading the connection: its
// records, heartbeats and cancel frames waited until a poll's wait ended (30 s by default),
// while a poll its client had given up on could still claim a run. A cancel frame is acted on
// by the read loop itself, so it waits behind nothing but the calls already read; a poll it
// ends stops counting at once.
//
// A client that asks for jobs-frames/2 from an engine that serves only version 1 gets 400 to
// its upgrade and asks again for version 1, where its polls go plain (client_frames_mux.go).

// FramesProtocolMux is the Upgrade token of the multiplexed framed calls.
const FramesProtocolMux = "jobs-frames/2"

const (
	muxCallHeader   = 9  // u32 length, u8 route, u32 id
	muxAnswerHeader = 10 // u32 length, u16 status, u32 id
	// muxInFlight bounds the calls of one connection served at once, polls aside: a worker has
	// one call per slot in flight, and a client that sends more waits for the engine to read
	// them.
	muxInFlight = 256
	// muxMaxPolls bounds the polls of one connection waiting at once: a worker has one per queue
	// it serves.
	muxMaxPolls = 1024
)

// serveMux serves the multiplexed calls of fc until the client closes the connection, it stays
// idle past the idle timeout, a frame is over the body limit or the server drains; the calls
// in flight are answered before it returns (and the caller closes the connection).
func (fc *frameConn) serveMux() {
	s := fc.s
	// The polls in flight, by call id: a cancel frame or the end of the connection ends them,
	// as a plain poll ends when its client leaves.
	connCtx, leave := context.WithCancel(fc.r.Context())
	defer leave()
	polls := &muxPolls{byID: map[uint32]*muxPoll{}}
	// The calls are served by goroutines kept for the connection's life, not one started per
	// call: a handler's path (the record, the engine, the wire walk) grows a new goroutine's
	// stack several times, and those copies were a tenth of the engine's CPU when each call had
	// its own goroutine. A call goes to an idle server goroutine if there is one, else to a new
	// one while fewer than muxInFlight serve, else the loop waits for one to be free.
	var (
		out      = coalescer{conn: fc.conn, timeout: fc.s.cfg.BodyTimeout}
		inflight sync.WaitGroup
		calls    = make(chan muxCallIn)
		servers  = 0
	)
	defer func() {
		close(calls)
		// The client left or the connection ends: the polls waiting answer now (empty), the
		// other calls as they finish.
		leave()
		inflight.Wait()
	}()
	serve := func(c muxCallIn) {
		defer inflight.Done()
		for {
			fc.serveMuxCall(&out, c)
			var ok bool
			if c, ok = <-calls; !ok {
				return
			}
		}
	}
	// A connection whose only call is a long-poll sends nothing while it waits: it is not idle
	// until the longest poll could have ended.
	idle := max(serverIdleTimeout, s.cfg.MaxPollWait+serverIdleTimeout/2)
	for {
		if now := time.Now(); now.Sub(fc.idleSet) > idleSlack {
			_ = fc.conn.SetReadDeadline(now.Add(idle))
			fc.idleSet = now
		}
		if s.drainCtx.Err() != nil {
			return
		}
		var head [muxCallHeader]byte
		if _, err := io.ReadFull(fc.br, head[:]); err != nil {
			return
		}
		n, route, id := binary.BigEndian.Uint32(head[:4]), head[4], binary.BigEndian.Uint32(head[5:])
		if int64(n) > s.cfg.MaxBody {
			// The rest of the stream cannot be trusted to be read past: answer, then close.
			fc.muxAnswer(&out, id, fc.r, jobs.Errorf(jobs.CodePayloadTooLarge, "the request body is over the limit of %d bytes", s.cfg.MaxBody), nil)
			return
		}
		if fc.br.Buffered() < int(n) {
			// The body is still coming: it has BodyTimeout to arrive, as a plain request's has.
			_ = fc.conn.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
			fc.idleSet = time.Time{}
		}
		body := getMuxBody(int(n))
		if _, err := io.ReadFull(fc.br, *body); err != nil {
			putMuxBody(body)
			return
		}
		if route == muxCancel {
			// A caller stopped waiting for call id: its poll, if one is waiting, ends now.
			putMuxBody(body)
			polls.cancel(id)
			continue
		}
		if int(route) >= len(fc.routes) || fc.routes[route] == nil {
			putMuxBody(body)
			fc.muxAnswer(&out, id, fc.r, jobs.Errorf(jobs.CodeBadRequest, "frame names route %d, which this engine does not serve framed", route), nil)
			continue
		}
		c := muxCallIn{route: route, id: id, body: body}
		if route == routePoll {
			// On a goroutine of its own, outside muxInFlight: a poll waits, and the calls
			// behind it must not (see above).
			if !polls.room(id) {
				putMuxBody(body)
				fc.muxAnswer(&out, id, fc.r, jobs.Errorf(jobs.CodeOverloaded, "this connection has %d polls waiting, the most it serves at once; poll again once one is answered", muxMaxPolls), nil)
				continue
			}
			c.ctx, c.poll = polls.add(connCtx, id)
			c.polls = polls
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				fc.serveMuxCall(&out, c)
			}()
			continue
		}
		select {
		case calls <- c:
		default:
			if servers < muxInFlight {
				servers++
				inflight.Add(1)
				go serve(c)
			} else {
				calls <- c
			}
		}
	}
}

// muxCallIn is a call read from a multiplexed connection, for one of its server goroutines.
type muxCallIn struct {
	route byte
	id    uint32
	body  *[]byte
	// A poll's own context (ended by its cancel frame or the connection's end) and the table
	// it is removed from once answered; other calls are served under the upgrade's context,
	// as in version 1: a record's commit is not cut short by its caller leaving.
	ctx   context.Context
	poll  *muxPoll
	polls *muxPolls
}

// muxCancel is the route number of a cancel frame (version 2 only): no body, the id of a call
// whose caller stopped waiting, no answer. Only a poll is ended by it; for any other call, or
// one already answered, it does nothing.
const muxCancel = 255

// muxPolls are a connection's polls in flight.
type muxPolls struct {
	mu   sync.Mutex
	byID map[uint32]*muxPoll
}

type muxPoll struct{ cancel context.CancelFunc }

func (p *muxPolls) add(parent context.Context, id uint32) (context.Context, *muxPoll) {
	ctx, cancel := context.WithCancel(parent)
	mp := &muxPoll{cancel: cancel}
	p.mu.Lock()
	if old := p.byID[id]; old != nil {
		// A client reusing an id still in flight: the older poll ends rather than stays
		// beyond reach of a cancel frame.
		old.cancel()
	}
	p.byID[id] = mp
	p.mu.Unlock()
	return ctx, mp
}

// room reports whether a poll with this id may wait: fewer than muxMaxPolls wait, or it takes the
// id of one that does (which add ends).
func (p *muxPolls) room(id uint32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byID) < muxMaxPolls || p.byID[id] != nil
}

// cancel ends the poll waiting under id, which stops counting against muxMaxPolls at once: the
// client counts it done as it sends the cancel, and may send its next poll right behind it.
func (p *muxPolls) cancel(id uint32) {
	p.mu.Lock()
	mp := p.byID[id]
	delete(p.byID, id)
	p.mu.Unlock()
	if mp != nil {
		mp.cancel()
	}
}

// done removes an answered poll (unless a later call took its id) and frees its context.
func (p *muxPolls) done(id uint32, mp *muxPoll) {
	p.mu.Lock()
	if p.byID[id] == mp {
		delete(p.byID, id)
	}
	p.mu.Unlock()
	mp.cancel()
}

// serveMuxCall runs one call's handler and queues its answer.
func (fc *frameConn) serveMuxCall(out *coalescer, c muxCallIn) {
	route, id, body := c.route, c.id, c.body
	// The route's handler sees the request it would have seen on its own: the upgrade's context
	// and headers (a poll: its own context), its own path and this frame's body. A shallow copy
	// per call: calls run at once.
	r := new(http.Request)
	*r = *fc.reqs[route]
	if c.ctx != nil {
		r = r.WithContext(c.ctx)
	}
	fb := frameBody{b: *body}
	r.Body = &fb
	r.ContentLength = int64(len(*body))
	w := muxWriters.Get().(*frameWriter)
	w.reset()
	err := fc.callOn(route, w, r)
	if c.poll != nil {
		// Before its answer is written: the client counts the poll done when the answer comes,
		// and may send its next poll right behind it (muxMaxPolls).
		c.polls.done(id, c.poll)
	}
	fc.muxAnswer(out, id, r, err, w)
	putMuxBody(body)
	if cap(w.buf) <= maxKeptAnswer {
		muxWriters.Put(w)
	}
}

// muxAnswer queues a call's answer (the handler's, or err's refusal) and writes it unless
// another goroutine is writing, which then writes it with its next batch.
func (fc *frameConn) muxAnswer(out *coalescer, id uint32, r *http.Request, err error, w *frameWriter) {
	w, status := fc.answerOf(r, err, w)
	var head [muxAnswerHeader]byte
	binary.BigEndian.PutUint32(head[:4], uint32(len(w.buf)))
	binary.BigEndian.PutUint16(head[4:6], uint16(status))
	binary.BigEndian.PutUint32(head[6:], id)
	if out.write(head[:], w.buf) != nil {
		// The client is gone or stuck: the calls still in flight have no one to answer.
		// Closing the connection ends the read loop too.
		_ = fc.conn.Close()
	}
}

// muxWriters are the answer buffers of multiplexed calls.
var muxWriters = sync.Pool{New: func() any { return &frameWriter{} }}

// muxBodies are the request bodies of multiplexed calls, read by the connection's loop and
// given to the call's goroutine.
var muxBodies = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func getMuxBody(n int) *[]byte {
	b := muxBodies.Get().(*[]byte)
	if cap(*b) < n {
		*b = make([]byte, n)
	}
	*b = (*b)[:n]
	return b
}

func putMuxBody(b *[]byte) {
	if cap(*b) <= maxKeptAnswer {
		muxBodies.Put(b)
	}
}
