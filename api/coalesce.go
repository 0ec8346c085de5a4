package api

import (
	"sync"
	"time"
)

// coalescer is the write side of a multiplexed framed connection, on either end: frames queued
// by many goroutines, those ready together written in one write. The goroutine that finds no
// write in progress writes its frame at once, then whatever was queued while its write was in
// the kernel, in one write, until nothing is left; no frame waits for another to be ready.
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
}

// write queues head and body as one frame and writes it unless another goroutine is writing,
// which then writes it with its next batch. It returns the error of a write this goroutine
// made; after a failed write every frame is dropped (the caller ends the connection).
func (c *coalescer) write(head, body []byte) error {
	c.mu.Lock()
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
	var err error
	for len(c.pending) > 0 {
		batch := c.pending
		c.pending = c.spare[:0]
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
	c.mu.Unlock()
	return err
}
