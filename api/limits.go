package api

import (
	"io"
	"net"
	"net/http"
	"sync"
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

// limitListener serves at most n connections at once: Accept waits for one to close. A slot is
// given back exactly once per connection, however often Close is called.
type limitListener struct {
	net.Listener
	slots chan struct{}
}

func newLimitListener(l net.Listener, n int) net.Listener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
