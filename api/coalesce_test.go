package api

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// countingConn records each write the coalescer makes.
type countingConn struct {
	mu     sync.Mutex
	writes [][]byte
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, append([]byte(nil), b...))
	c.mu.Unlock()
	return len(b), nil
}

func (c *countingConn) SetWriteDeadline(time.Time) error { return nil }

// The frames of one wave (goroutines made runnable together, as a group commit's answers make
// them) go out in one write, in full: the first goroutine yields before it writes, and the
// others queue behind it. One processor makes the order of the wave deterministic; without the
// yield each frame was a write of its own.
func TestCoalescerWritesAWaveOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	conn := &countingConn{}
	c := &coalescer{conn: conn, timeout: time.Minute}
	const n = 16
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := c.write([]byte{'h', byte(i)}, []byte{'b', byte(i)}); err != nil {
				t.Error(err)
			}
		}()
	}
	for range n {
		runtime.Gosched() // every goroutine waits on start
	}
	close(start)
	wg.Wait()
	if len(conn.writes) != 1 {
		t.Fatalf("%d frames went out in %d writes; want one", n, len(conn.writes))
	}
	seen := map[byte]bool{}
	w := conn.writes[0]
	if len(w) != 4*n {
		t.Fatalf("the write has %d bytes; want %d", len(w), 4*n)
	}
	for j := 0; j < len(w); j += 4 {
		if w[j] != 'h' || w[j+2] != 'b' || w[j+1] != w[j+3] {
			t.Fatalf("frame at %d is torn: %q", j, w[j:j+4])
		}
		seen[w[j+1]] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct frames written; want %d", len(seen), n)
	}
}

// A writer alone writes at once: the yields find nothing and the frame goes out by itself.
func TestCoalescerWritesALoneFrame(t *testing.T) {
	conn := &countingConn{}
	c := &coalescer{conn: conn, timeout: time.Minute}
	for i := range 3 {
		if err := c.write([]byte{'h'}, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if len(conn.writes) != 3 {
		t.Fatalf("%d writes for three frames sent one after another; want 3", len(conn.writes))
	}
}
