package api_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// TestPollAnswerHasAByteBudget: a poll asking for many runs with large inputs gets what fits the
// budget; the rest are handed back at once, ready, with no attempt spent.
func TestPollAnswerHasAByteBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{MaxPollBytes: 64 << 10})
	ctx := context.Background()
	big, err := jobs.Encode(strings.Repeat("x", 30<<10))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := b.env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Queue: "q", Key: string(rune('a' + i)), NoTenant: true, Input: big}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Declare(t, b.client, "w", testenv.Untyped("j", "q"))
	tasks, err := b.client.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 2 {
		t.Fatalf("%d tasks of 30 KiB under a 64 KiB budget, want 2", len(tasks))
	}
	runs, err := b.env.Engine.ListRuns(ctx, store.ListParams{Queue: "q", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, r := range runs {
		if r.State == store.StateReady {
			ready++
			if r.Attempt != 1 {
				t.Fatalf("a handed-back run is on attempt %d", r.Attempt)
			}
		}
	}
	if ready != 8 {
		t.Fatalf("%d runs ready after the poll, want the 8 handed back", ready)
	}
	// One task is always sent, however large.
	one := setup(t, api.Config{MaxPollBytes: 1})
	if _, err := one.env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Queue: "q", Key: "k", NoTenant: true, Input: big}); err != nil {
		t.Fatal(err)
	}
	testenv.Declare(t, one.client, "w", testenv.Untyped("j", "q"))
	if tasks, err := one.client.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 10}); err != nil || len(tasks) != 1 {
		t.Fatalf("a 1-byte budget: %d tasks, %v; want the one", len(tasks), err)
	}
}

// TestUnknownRoutesAndMethods: 404 for a path no route has, 405 (with Allow) for a method a path
// does not take.
func TestUnknownRoutesAndMethods(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	if st, _, out := b.call(t, http.MethodGet, "/v1/nothing", "", "", nil); st != http.StatusNotFound || jsonCode(t, out) != jobs.CodeRouteNotFound {
		t.Fatalf("unknown route = %d %s", st, out)
	}
	st, h, out := b.call(t, http.MethodDelete, "/v1/runs", "", "", nil)
	if st != http.StatusMethodNotAllowed || jsonCode(t, out) != jobs.CodeMethodNotAllowed || !strings.Contains(h.Get("Allow"), "POST") {
		t.Fatalf("DELETE /v1/runs = %d %s (Allow %q)", st, out, h.Get("Allow"))
	}
	if st, _, out := b.call(t, http.MethodGet, "/v1/worker/poll", "", "", nil); st != http.StatusMethodNotAllowed {
		t.Fatalf("GET /v1/worker/poll = %d %s", st, out)
	}
}

// startServer serves an engine on a free loopback port with cfg.
func startServer(t *testing.T, cfg api.Config) (*api.Server, string) {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	cfg.Engine, cfg.Logger, cfg.Addr = env.Engine, env.Logger, "127.0.0.1:0"
	srv, err := api.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
	})
	return srv, srv.Addr()
}

// TestTrickledBodyIsCutOff: a body that does not arrive within BodyTimeout is refused, and the
// connection does not stay held for the server's whole read timeout.
func TestTrickledBodyIsCutOff(t *testing.T) {
	t.Parallel()
	_, addr := startServer(t, api.Config{BodyTimeout: 200 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Write([]byte("POST /v1/runs HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"))
	if err != nil {
		t.Fatal(err)
	}
	// The rest never comes. The answer must, long before the server's one-minute read timeout.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("a stalled body = %d, want 400", res.StatusCode)
	}
}

// TestConnectionCap: past MaxConns, a connection is not served until another closes.
func TestConnectionCap(t *testing.T) {
	t.Parallel()
	_, addr := startServer(t, api.Config{MaxConns: 2})
	get := func(c net.Conn, wait time.Duration) error {
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\n\r\n")); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(wait))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			res.Body.Close()
		}
		return err
	}
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := get(c, 5*time.Second); err != nil {
			t.Fatalf("a connection under the cap: %v", err)
		}
		held = append(held, c)
	}
	third, err := net.Dial("tcp", addr) // the kernel accepts it; the server does not serve it
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if err := get(third, 300*time.Millisecond); err == nil {
		t.Fatal("a third connection was served over a cap of 2")
	}
	held[0].Close()
	// A fresh request on a fresh connection, now that a slot is free.
	fourth, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fourth.Close()
	third.Close()
	if err := get(fourth, 5*time.Second); err != nil {
		t.Fatalf("after a connection closed: %v", err)
	}
}

// TestFailedListenHasItsOwnCode: an address in use is X_LISTEN_FAILED, not a bad request.
func TestFailedListenHasItsOwnCode(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Addr: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); !jobs.HasCode(err, jobs.CodeListenFailed) {
		t.Fatalf("listen on an address in use: %v, want X_LISTEN_FAILED", err)
	}
}

// TestLongPollOutlivesBodyTimeout: the body deadline covers the body only; a long-poll that waits
// past it still receives the run that becomes ready.
func TestLongPollOutlivesBodyTimeout(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Addr: "127.0.0.1:0", BodyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(context.Background())
	c, err := api.NewClient("http://"+srv.Addr(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = env.Engine.Enqueue(context.Background(), jobs.EnqueueRequest{Job: "j", Queue: "q", Key: "k", NoTenant: true})
	}()
	testenv.Declare(t, c, "w", testenv.Untyped("j", "q"))
	tasks, err := c.Poll(context.Background(), frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 1, Wait: 5 * time.Second})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("a long-poll past the body timeout: %d tasks, %v", len(tasks), err)
	}
}
