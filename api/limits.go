package api

import (
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ultimat3/jobs/api/internal/route"
	"github.com/ultimat3/jobs/frontend"
)

// Defaults of the server's limits (Config.MaxPollBytes, BodyTimeout, MaxConns).
const (
	// defaultPollBytes bounds one poll's answer: a worker asking for 1,000 tasks of 1 MiB inputs
	// would otherwise have the engine hold (and send) a gigabyte for one request.
	defaultPollBytes = 8 << 20
	// defaultBodyTimeout bounds how long a request body may take to arrive: a body trickled at
	// a byte a second would otherwise hold a connection and a goroutine for the server's whole
	// read timeout.
	defaultBodyTimeout = 10 * time.Second
	// defaultMaxConns caps the connections served at once; more wait in the kernel's backlog.
	defaultMaxConns = 1024
	// taskOverhead is a generous estimate of a task's encoded size besides its input.
	taskOverhead = 512
	// eventOverhead is the same for an event of a task's Tail besides its name and data.
	eventOverhead = 64
)

// budgetTasks splits tasks into those that fit the poll's byte budget and the rest, which the
// caller hands back. The first task is always kept, whatever its size, or a large input could
// never be delivered.
func budgetTasks(tasks []frontend.Task, budget int) (keep, rest []frontend.Task) {
	used := 0
	for i, t := range tasks {
		used += len(t.Input) + len(t.Key) + len(t.Tenant) + len(t.EnqueuedBy) + len(t.TraceParent) + len(t.TraceState) + taskOverhead
		for _, ev := range t.Tail {
			used += len(ev.Name) + len(ev.Data) + eventOverhead
		}
		if i > 0 && used > budget {
			return tasks[:i], tasks[i:]
		}
	}
	return tasks, nil
}

// bodyDeadline gives the request's body BodyTimeout to arrive, on connections that can take a
// read deadline (a real one; not an httptest recorder). Once the body has been read the deadline
// is lifted again: net/http reads the idle connection in the background to notice a client
// leaving, and a deadline passing there would cancel a long-poll still waiting for work.
func (s *Server) bodyDeadline(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) != nil {
		return
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
}

// deadlineBody lifts the read deadline once the body has been read to its end.
type deadlineBody struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		// Only at the end: after a failed read the deadline must stay, or net/http's discarding
		// of the unread rest would wait on the trickle with no bound.
		b.once.Do(b.lift)
	}
	return n, err
}

// unrouted answers a request no route takes, when mux takes none (route.Refusal): 405
// X_METHOD_NOT_ALLOWED (with Allow) when the path exists for other methods, else 404
// X_ROUTE_NOT_FOUND. It reports whether it answered.
func (s *Server) unrouted(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) bool {
	e, allow := route.Refusal(mux, r)
	if e == nil {
		return false
	}
	if allow != "" {
		w.Header().Set("Allow", allow)
	}
	s.writeError(w, r, e)
	return true
}

// untrustedIdle is how long a connection that has not carried an authenticated request may
// wait for its next request (an authenticated one has serverIdleTimeout): held open, such
// connections would otherwise keep MaxConns slots from the workers for two minutes each.
const untrustedIdle = 5 * time.Second

// limitListener serves at most n connections at once: Accept waits for one to close. A slot is
// given back exactly once per connection, however often Close is called.
//
// A connection that has not yet carried an authenticated request (see trust) is spare while it
// waits, before its first request or between requests: when every slot is taken, Accept closes
// the spare connection that has waited longest rather than wait itself, so that clients without
// a token (or with none yet) cannot hold the slots the workers need; and a spare connection is
// closed after untrustedIdle. A connection that carried an authenticated request is never closed
// to make room. Without credentials every connection counts as authenticated (trustAll): the
// server then has nothing to tell its clients apart by, and serves loopback only.
type limitListener struct {
	net.Listener
	slots    chan struct{}
	trustAll bool

	mu    sync.Mutex
	spare map[*limitConn]time.Time // waiting, never authenticated: since when
	freed chan struct{}            // a token when a connection became spare
	done  chan struct{}            // closed by Close
	once  sync.Once
}

func newLimitListener(l net.Listener, n int, trustAll bool) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), trustAll: trustAll,
		spare: map[*limitConn]time.Time{}, freed: make(chan struct{}, 1), done: make(chan struct{})}
}

// Accept takes the next connection, then a slot for it: so a spare connection is closed only
// for a client that is there to take its place. While it waits for a slot, the connection it
// holds is not served, as if it were still in the kernel's backlog.
func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if !l.acquire() {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	lc := &limitConn{Conn: c, l: l}
	if l.trustAll {
		lc.trusted.Store(true)
	} else {
		l.waiting(lc, false) // spare until its first request has been read
	}
	return lc, nil
}

// acquire takes a slot: a free one, else the one of the spare connection that has waited
// longest, else the first to free (or to become spare). It reports false when the listener is
// closed meanwhile.
func (l *limitListener) acquire() bool {
	for {
		select {
		case l.slots <- struct{}{}:
			return true
		default:
		}
		if l.evict() {
			continue
		}
		select {
		case l.slots <- struct{}{}:
			return true
		case <-l.freed:
		case <-l.done:
			return false
		}
	}
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// evict closes the spare connection that has waited longest, if there is one.
func (l *limitListener) evict() bool {
	l.mu.Lock()
	var oldest *limitConn
	var since time.Time
	for c, t := range l.spare {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	_ = oldest.Close() // gives its slot back
	return true
}

// waiting records that c, not authenticated, waits for a request: spare from now, and closed
// after untrustedIdle when idle (between requests; before the first, ReadHeaderTimeout bounds
// the wait).
func (l *limitListener) waiting(c *limitConn, idle bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed {
		return
	}
	since := time.Now()
	l.spare[c] = since
	if idle {
		c.stopTimer()
		c.timer = time.AfterFunc(untrustedIdle, func() {
			l.mu.Lock()
			expired := l.spare[c] == since
			l.mu.Unlock()
			if expired {
				_ = c.Close()
			}
		})
	}
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// busy records that c is not spare: serving a request, upgraded, closed, or authenticated.
func (l *limitListener) busy(c *limitConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.spare, c)
	c.stopTimer()
}

// connState follows net/http's view of each connection (http.Server.ConnState).
func (l *limitListener) connState(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*limitConn)
	if !ok {
		return
	}
	switch state {
	case http.StateIdle:
		if !c.trusted.Load() {
			l.waiting(c, true)
		}
	case http.StateActive, http.StateHijacked, http.StateClosed:
		l.busy(c)
	}
}

// trust marks the connection a request came on as authenticated: no longer spare, and kept
// alive as long as any (serverIdleTimeout). For a request not served through Start (no
// connection of ours), it does nothing.
func trust(r *http.Request) {
	c, ok := r.Context().Value(connKey{}).(*limitConn)
	if !ok || c.trusted.Load() {
		return
	}
	c.trusted.Store(true)
	c.l.busy(c)
}

// connKey carries a request's *limitConn in its context (http.Server.ConnContext).
type connKey struct{}

type limitConn struct {
	net.Conn
	l       *limitListener
	once    sync.Once
	trusted atomic.Bool
	// closed and timer are guarded by l.mu.
	closed bool
	timer  *time.Timer
}

// stopTimer stops c's idle timer. Called with l.mu held.
func (c *limitConn) stopTimer() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.closed = true
		delete(c.l.spare, c)
		c.stopTimer()
		c.l.mu.Unlock()
		<-c.l.slots
	})
	return err
}
