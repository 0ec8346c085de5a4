package api

import (
	"runtime"
	"sync"
	"time"
)

// coalescer is the write side of a multiplexed framed connection, on either end: frames queued
// by many goroutines, those ready together written in one write. The goroutine that finds no
// write in progress first yields its processor to the goroutines already runnable (see
// gatherFrames), then writes what was queued, then whatever was queued while its write was in
// the kernel, in one write, until nothing is left; no frame waits on a timer or for a frame
// that is not yet on its way.
type coalescer struct {
	conn interface {
		Write([]byte) (int, error)
		SetWriteDeadline(time.Time) error
	}
	// timeout bounds one write: a peer that reads nothing for this long is taken as gone.
	timeout time.Duration

	mu      sync.Mutex
	pending []byte // frames waiting for the writer
	spare   []byte // the buffer the writer last wrote, reused for the next batch
	writing bool
	failed  bool
	until   time.Time // the write deadline, set by the goroutine writing
	// taken is signalled when the writer takes the pending frames (or stops), for the
	// goroutines waiting for room (maxPendingBytes); waiters counts them.
	taken   sync.Cond
	waiters int
}

// maxPendingBytes bounds the frames queued behind a write in progress. A peer that does not read
// holds the writer in its write (up to the timeout) while the others queue: on the engine the
// connection's read loop went on reading calls meanwhile, so a client that sent small calls with
// large answers and read none made the engine hold every answer (3,000 history reads of a run
// with a 256 KB input: a 1.1 GB heap). Past the bound a frame waits for the writer to take the
// queue instead of joining it, so its goroutine stays busy and the engine stops reading the
// connection once its calls in flight (muxInFlight) all wait; a peer that never reads is cut
// by the write timeout. What one connection holds is then at most the batch being written and
// this bound, plus one frame each.
const maxPendingBytes = 8 << 20

// write queues head and body as one frame and writes it unless another goroutine is writing,
// which then writes it with its next batch (once the queue is under maxPendingBytes). It returns
// the error of a write this goroutine made; after a failed write every frame is dropped (the
// caller ends the connection).
func (c *coalescer) write(head, body []byte) error {
	c.mu.Lock()
	for c.writing && !c.failed && len(c.pending) >= maxPendingBytes {
		if c.taken.L == nil {
			c.taken.L = &c.mu
		}
		c.waiters++
		c.taken.Wait()
		c.waiters--
	}
	if c.failed {
		c.mu.Unlock()
		return nil
	}
	c.pending = append(c.pending, head...)
	c.pending = append(c.pending, body...)
	if c.writing {
		c.mu.Unlock()
		return nil
	}
	c.writing = true
	c.gatherFrames()
	var err error
	for len(c.pending) > 0 {
		batch := c.pending
		c.pending = c.spare[:0]
		if c.waiters > 0 {
			c.taken.Broadcast()
		}
		c.mu.Unlock()
		// Set again only when it drew near: each set is a timer reset in the runtime's poller.
		if now := time.Now(); c.until.Sub(now) < c.timeout/2 {
			c.until = now.Add(c.timeout)
			_ = c.conn.SetWriteDeadline(c.until)
		}
		_, err = c.conn.Write(batch)
		c.mu.Lock()
		if cap(batch) <= 4*maxKeptAnswer {
			c.spare = batch[:0]
		} else {
			c.spare = nil
		}
		if err != nil {
			c.failed, c.pending = true, nil
			break
		}
	}
	c.writing = false
	if c.waiters > 0 {
		// A failed write: the waiters drop their frames. Else one of them writes next.
		c.taken.Broadcast()
	}
	c.mu.Unlock()
	return err
}

// coalesceRounds is how many yields in a row may bring no frame before the writer writes: the
// goroutines of one wave may be queued behind one another on both processors. coalesceMax
// bounds the yields of one write, so that a steady stream of frames cannot hold it back.
const (
	coalesceRounds = 2
	coalesceMax    = 8
)

// gatherFrames lets the frames of one wave join the first one's write. Frames come in waves:
// the engine's answers to one group commit are ready together, and so are the records the
// bodies they woke send next. Without it the first goroutine of a wave wrote its frame alone
// while the rest, already runnable, had yet to run; each of their frames then went in a write
// of its own (a loopback write is a syscall that also delivers the bytes to the reader, which
// wakes once per write), and the reader handed the engine its records one at a time, so
// its group commits were smaller than the in-process ones. So the writer yields before it
// writes, and again while the yield brought frames. A yield with nothing else runnable returns
// at once; nothing waits for a frame that is not already on its way. Called with c.mu held,
// c.writing set; returns with c.mu held.
func (c *coalescer) gatherFrames() {
	for empty, rounds := 0, 0; empty < coalesceRounds && rounds < coalesceMax; rounds++ {
		n := len(c.pending)
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
		if len(c.pending) > n {
			empty = 0
		} else {
			empty++
		}
	}
}
