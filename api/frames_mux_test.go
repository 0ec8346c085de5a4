package api_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// upgradeCount counts the upgrades to each version of the frames and the plain requests by path;
// v1Only answers an upgrade to version 2 as an engine of version 1 does (400).
type upgradeCount struct {
	next   http.Handler
	v1Only bool
	mu     sync.Mutex
	n      map[string]int
}

func (u *upgradeCount) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Path
	if up := r.Header.Get("Upgrade"); up != "" {
		key = up
	}
	u.mu.Lock()
	u.n[key]++
	u.mu.Unlock()
	if u.v1Only && key == api.FramesProtocolMux {
		w.Header().Set("Content-Type", api.ContentMsgpack)
		w.WriteHeader(http.StatusBadRequest)
		b, _ := msgpack.Marshal(jobs.Errorf(jobs.CodeBadRequest, "want Upgrade: %s", api.FramesProtocol))
		_, _ = w.Write(b)
		return
	}
	u.next.ServeHTTP(w, r)
}

func (u *upgradeCount) count(key string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.n[key]
}

func muxServer(t *testing.T, cfg api.Config, v1Only bool) (*testenv.Env, *upgradeCount, *api.Client, string) {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	cfg.Engine, cfg.Logger, cfg.NoUI = env.Engine, env.Logger, true
	srv, err := api.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	uc := &upgradeCount{next: srv, v1Only: v1Only, n: map[string]int{}}
	ts := httptest.NewServer(uc)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)
	c, err := api.NewClient(ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return env, uc, c, ts.URL
}

// A worker's framed calls all share one connection upgraded to version 2, however many are in
// flight, and every run's history is what plain records write; each caller gets its own answer.
func TestMuxOneConnectionForAllCalls(t *testing.T) {
	t.Parallel()
	env, uc, c, _ := muxServer(t, api.Config{}, false)
	reg, err := jobs.NewRegistry(batchedJob)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, worker.Config{Frontend: c, Registry: reg, Clock: env.Clock, Logger: env.Logger,
		PollWait: time.Second, Concurrency: 8})
	const runs = 16
	ids := make([]string, runs)
	for i := range ids {
		res, err := batchedJob.Enqueue(t.Context(), env.Engine, i)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = res.RunID
	}
	for _, id := range ids {
		env.Await(id, store.StateCompleted)
	}
	// Concurrent history reads of different runs: each caller reads its own run's events.
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; i < 20; i++ {
				id := ids[(g+i)%runs]
				got, err := c.History(t.Context(), id, 0)
				if err != nil {
					t.Error(err)
					return
				}
				want := env.History(id)
				gb, _ := msgpack.Marshal(got)
				wb, _ := msgpack.Marshal(want)
				if string(gb) != string(wb) {
					t.Errorf("history of %s read at once with others: %d events, want %d", id, len(got), len(want))
					return
				}
			}
		})
	}
	wg.Wait()
	if n := uc.count(api.FramesProtocolMux); n != 1 {
		t.Errorf("%d upgrades to %s; want one connection for every call", n, api.FramesProtocolMux)
	}
	if n := uc.count(api.FramesProtocol) + uc.count("/v1/worker/record") + uc.count("/v1/worker/history"); n != 0 {
		t.Errorf("%d calls or connections outside the multiplexed connection", n)
	}
}

// An engine that serves only version 1 answers the upgrade to version 2 with 400: the client
// asks once, then frames its calls by version 1.
func TestMuxFallsBackToVersion1(t *testing.T) {
	t.Parallel()
	_, uc, c, _ := muxServer(t, api.Config{}, true)
	for i := 0; i < 5; i++ {
		if _, err := c.Heartbeat(t.Context(), emptyBeat); err != nil {
			t.Fatal(err)
		}
	}
	if n := uc.count(api.FramesProtocolMux); n != 1 {
		t.Errorf("%d upgrades to version 2 asked of an engine of version 1; want 1", n)
	}
	if n := uc.count(api.FramesProtocol); n != 1 {
		t.Errorf("%d upgrades to version 1; want 1", n)
	}
	if n := uc.count("/v1/worker/heartbeat"); n != 0 {
		t.Errorf("%d plain heartbeats; want all framed", n)
	}
}

// A caller that stops waiting gets its context's error at once and leaves the connection to
// the others.
func TestMuxCallerLeaves(t *testing.T) {
	t.Parallel()
	env, uc, c, _ := muxServer(t, api.Config{}, false)
	res, err := batchedJob.Enqueue(t.Context(), env.Engine, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.History(ctx, res.RunID, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("a call whose context ended: %v; want context.Canceled", err)
	}
	for i := 0; i < 3; i++ {
		if _, err := c.History(t.Context(), res.RunID, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := uc.count(api.FramesProtocolMux); n != 1 {
		t.Errorf("%d upgrades; want the one connection kept", n)
	}
}

// muxConn is a raw connection upgraded to version 2.
type muxRaw struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

func dialMux(t *testing.T, url string) *muxRaw {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	fmt.Fprintf(conn, "POST /v1/worker/frames HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/msgpack\r\nContent-Length: 0\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", api.FramesProtocolMux)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols || res.Header.Get("Upgrade") != api.FramesProtocolMux {
		t.Fatalf("upgrade: %v, %v", res, err)
	}
	return &muxRaw{t: t, conn: conn, br: br}
}

func (m *muxRaw) send(route byte, id uint32, body []byte, declared int) {
	m.t.Helper()
	head := make([]byte, 9)
	binary.BigEndian.PutUint32(head, uint32(declared))
	head[4] = route
	binary.BigEndian.PutUint32(head[5:], id)
	if _, err := m.conn.Write(append(head, body...)); err != nil {
		m.t.Fatal(err)
	}
}

// read reads one answer: its status, its call's id and its refusal, if it is one.
func (m *muxRaw) read() (int, uint32, *jobs.Error) {
	m.t.Helper()
	ah := make([]byte, 10)
	if _, err := io.ReadFull(m.br, ah); err != nil {
		m.t.Fatal(err)
	}
	b := make([]byte, binary.BigEndian.Uint32(ah))
	if _, err := io.ReadFull(m.br, b); err != nil {
		m.t.Fatal(err)
	}
	var e jobs.Error
	_ = msgpack.Unmarshal(b, &e)
	return int(binary.BigEndian.Uint16(ah[4:])), binary.BigEndian.Uint32(ah[6:]), &e
}

// Bad frames of version 2 are refused as version 1's are, each answer carrying its call's id: a
// route the engine does not frame gets X_BAD_REQUEST and the connection goes on, malformed
// msgpack X_BAD_REQUEST, a nil time no 5xx, a body over the limit X_PAYLOAD_TOO_LARGE and the
// end of the connection.
func TestMuxRefusesBadFrames(t *testing.T) {
	t.Parallel()
	_, _, _, url := muxServer(t, api.Config{MaxBody: 1 << 10}, false)
	m := dialMux(t, url)
	m.send(9, 7, []byte{0x80}, 1)
	if status, id, e := m.read(); status != http.StatusBadRequest || id != 7 || e.Code != jobs.CodeBadRequest {
		t.Errorf("an unknown route: %d id %d %+v; want 400 X_BAD_REQUEST for call 7", status, id, e)
	}
	m.send(0, 8, []byte{0x80}, 1)
	if status, id, e := m.read(); status != http.StatusBadRequest || id != 8 || e.Code != jobs.CodeBadRequest {
		t.Errorf("route 0: %d id %d %+v; want 400 X_BAD_REQUEST for call 8", status, id, e)
	}
	m.send(1, 9, []byte{0xc1}, 1)
	if status, id, e := m.read(); status != http.StatusBadRequest || id != 9 || e.Code != jobs.CodeBadRequest {
		t.Errorf("a record of malformed msgpack: %d id %d %+v; want 400 X_BAD_REQUEST for call 9", status, id, e)
	}
	for i, body := range nilTimeRecords() {
		m.send(1, uint32(100+i), body, len(body))
		if status, id, e := m.read(); status >= 500 || id != uint32(100+i) {
			t.Errorf("a record with a nil time: %d id %d %+v; want no 5xx", status, id, e)
		}
	}
	// Several calls sent at once are all answered, each with its id.
	want := map[uint32]bool{}
	for id := uint32(200); id < 210; id++ {
		m.send(3, id, []byte{0x80}, 1) // a history read naming no run
		want[id] = true
	}
	for range 10 {
		status, id, e := m.read()
		if !want[id] || status != http.StatusBadRequest || e.Code != jobs.CodeBadRequest {
			t.Errorf("a history read naming no run: %d id %d %+v", status, id, e)
		}
		delete(want, id)
	}
	m.send(1, 11, nil, 1<<20)
	if status, id, e := m.read(); status != http.StatusRequestEntityTooLarge || id != 11 || e.Code != jobs.CodePayloadTooLarge {
		t.Errorf("a body over the limit: %d id %d %+v; want 413 X_PAYLOAD_TOO_LARGE for call 11", status, id, e)
	}
	if _, err := m.br.ReadByte(); err != io.EOF {
		t.Errorf("after a body over the limit the connection should end: %v", err)
	}
}

// A frame cut short (a header, or a body shorter than it said) ends the connection, with no
// answer and no harm to the engine, which serves the next connection.
func TestMuxTruncatedFrames(t *testing.T) {
	t.Parallel()
	_, _, c, url := muxServer(t, api.Config{}, false)
	for _, raw := range [][]byte{{0, 0}, {0, 0, 0, 5, 1, 0, 0, 0, 1, 0x80}} {
		m := dialMux(t, url)
		if _, err := m.conn.Write(raw); err != nil {
			t.Fatal(err)
		}
		m.conn.(*net.TCPConn).CloseWrite()
		if b, err := m.br.ReadByte(); err != io.EOF {
			t.Errorf("frame %x cut short: read %x, %v; want the connection closed", raw, b, err)
		}
	}
	if _, err := c.Heartbeat(t.Context(), emptyBeat); err != nil {
		t.Fatal(err)
	}
}

// The upgrade to version 2 passes the same credential check as any request.
func TestMuxCredentials(t *testing.T) {
	t.Parallel()
	cfg := api.Config{Credentials: []api.Credential{{Token: "wt", Role: api.RoleWorker}, {Token: "vt", Role: api.RoleViewer}}}
	_, _, _, url := muxServer(t, cfg, false)
	for _, v := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"nope", http.StatusUnauthorized}, {"vt", http.StatusForbidden}, {"wt", http.StatusSwitchingProtocols}} {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/worker/frames", nil)
		req.Header.Set("Content-Type", api.ContentMsgpack)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", api.FramesProtocolMux)
		if v.token != "" {
			req.Header.Set("Authorization", "Bearer "+v.token)
		}
		conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_ = req.Write(conn)
		res, err := http.ReadResponse(bufio.NewReader(conn), req)
		conn.Close()
		if err != nil || res.StatusCode != v.want {
			t.Errorf("upgrade with token %q: %v, %v; want %d", v.token, res, err, v.want)
		}
	}
}

// Polls go on the multiplexed connection, beside the other calls; on an engine of version 1
// they stay plain requests (a long-poll would hold a connection of version 1).
func TestMuxPolls(t *testing.T) {
	t.Parallel()
	for _, v1Only := range []bool{false, true} {
		env, uc, c, _ := muxServer(t, api.Config{}, v1Only)
		testenv.Declare(t, env.Engine, "w", testenv.Untyped("j", "q"))
		res, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "j", Key: "k", NoTenant: true, Queue: "q"})
		if err != nil {
			t.Fatal(err)
		}
		tasks, err := c.Poll(t.Context(), frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 5, Wait: time.Second})
		if err != nil || len(tasks) != 1 || tasks[0].RunID != res.RunID {
			t.Fatalf("version 1 only %v: poll = %+v, %v; want the run", v1Only, tasks, err)
		}
		// A poll with nothing to claim waits its wait, and a heartbeat beside it is not held up.
		polled := make(chan error, 1)
		go func() {
			_, err := c.Poll(t.Context(), frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 5, Wait: 500 * time.Millisecond})
			polled <- err
		}()
		time.Sleep(50 * time.Millisecond)
		began := time.Now()
		if _, err := c.Heartbeat(t.Context(), emptyBeat); err != nil || time.Since(began) > 300*time.Millisecond {
			t.Errorf("a heartbeat beside a poll: %v after %s", err, time.Since(began))
		}
		if err := <-polled; err != nil {
			t.Fatal(err)
		}
		want := 0
		if v1Only {
			want = 2
		}
		if n := uc.count("/v1/worker/poll"); n != want {
			t.Errorf("version 1 only %v: %d plain polls, want %d", v1Only, n, want)
		}
	}
}

// A poll on a version 1 connection is refused: polls are framed on version 2 only.
func TestMuxPollNotOnVersion1(t *testing.T) {
	t.Parallel()
	_, _, _, url := muxServer(t, api.Config{}, false)
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	fmt.Fprintf(conn, "POST /v1/worker/frames HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/msgpack\r\nContent-Length: 0\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", api.FramesProtocol)
	if res, err := http.ReadResponse(br, nil); err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v, %v", res, err)
	}
	body, _ := msgpack.Marshal(frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 1})
	head := make([]byte, 5)
	binary.BigEndian.PutUint32(head, uint32(len(body)))
	head[4] = 4
	if _, err := conn.Write(append(head, body...)); err != nil {
		t.Fatal(err)
	}
	ah := make([]byte, 6)
	if _, err := io.ReadFull(br, ah); err != nil {
		t.Fatal(err)
	}
	if status := binary.BigEndian.Uint16(ah[4:]); status != http.StatusBadRequest {
		t.Errorf("a poll framed on version 1: status %d, want 400", status)
	}
}

// A framed poll ends when its caller sends the cancel frame, or when its connection closes: it
// answers at once, and a run enqueued after that is not claimed for the caller that left.
func TestMuxPollEndsWhenItsCallerLeaves(t *testing.T) {
	t.Parallel()
	env, _, c, url := muxServer(t, api.Config{MaxPollWait: 10 * time.Second}, false)
	testenv.Declare(t, env.Engine, "w", testenv.Untyped("j", "q"))
	ready := func(key string) {
		t.Helper()
		res, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "j", Key: key, NoTenant: true, Queue: "q"})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		run, err := env.Engine.GetRun(t.Context(), res.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if run.State != store.StateReady {
			t.Errorf("run %s enqueued after its poller left: %s (fence %d); want it ready for another worker", key, run.State, run.Fence)
		}
	}

	// The client sends the cancel frame when its caller gives up.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 1, Wait: 10 * time.Second}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a poll whose caller gave up: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	ready("a")
	poll, _ := msgpack.Marshal(frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 1, Wait: 10 * time.Second})
	bad, _ := msgpack.Marshal(map[string]any{"worker_id": "", "queues": []string{"q"}})

	m := dialMux(t, url)
	m.send(4, 1, []byte{0xc1}, 1)
	if status, id, e := m.read(); status != http.StatusBadRequest || id != 1 || e.Code != jobs.CodeBadRequest {
		t.Errorf("a poll of malformed msgpack: %d id %d %+v; want 400 X_BAD_REQUEST", status, id, e)
	}
	m.send(4, 2, bad, len(bad))
	if status, id, e := m.read(); status != http.StatusBadRequest || id != 2 || e.Code != jobs.CodeBadRequest {
		t.Errorf("a poll naming no worker: %d id %d %+v; want 400 X_BAD_REQUEST", status, id, e)
	}
	m.send(4, 3, poll, len(poll))
	time.Sleep(50 * time.Millisecond)
	m.send(255, 99, nil, 0) // a cancel of no call: nothing
	began := time.Now()
	m.send(255, 3, nil, 0)
	if status, id, _ := m.read(); status != http.StatusOK || id != 3 || time.Since(began) > 5*time.Second {
		t.Errorf("a cancelled poll: %d id %d after %s; want its answer at once", status, id, time.Since(began))
	}

	m2 := dialMux(t, url)
	m2.send(4, 1, poll, len(poll))
	time.Sleep(50 * time.Millisecond)
	m2.conn.Close()
	time.Sleep(100 * time.Millisecond)
	ready("b")
}

// While one call dials and upgrades the connection, the others wait for it no longer than their
// own contexts allow: an engine that accepts and never answers holds only the caller dialling.
func TestMuxDialWaitIsBounded(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, conn) }()
		}
	}()
	c, err := api.NewClient("http://"+ln.Addr().String(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := make(chan struct{})
	go func() {
		defer close(first)
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		_, _ = c.Heartbeat(ctx, emptyBeat)
	}()
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	if _, err := c.Heartbeat(ctx, emptyBeat); err == nil {
		t.Error("a heartbeat to an engine that never answers was answered")
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("a call waited %s behind another's dial; want no longer than its own 200ms deadline", took)
	}
	<-first
}
