package api_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// transportClient serves an engine on a memory store and returns a client of it built with opts.
func transportClient(tb testing.TB, opts ...api.ClientOption) *api.Client {
	_, c := ownServer(tb, 0, nil, opts...)
	return c
}

// ownServer serves an engine on a memory store over a test server (maxBody: the server's
// MaxBody, 0 for its default; connState, when set, sees the server's connections) and returns a
// client of it.
func ownServer(tb testing.TB, maxBody int64, connState func(net.Conn, http.ConnState), opts ...api.ClientOption) (*httptest.Server, *api.Client) {
	tb.Helper()
	env := testenv.Start(tb, testenv.Options{Store: memory.New()})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, NoUI: true, MaxBody: maxBody})
	if err != nil {
		tb.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.ConnState = connState
	ts.Start()
	tb.Cleanup(ts.Close)
	tb.Cleanup(srv.Drain)
	c, err := api.NewClient(ts.URL, "", opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return ts, c
}

// An empty heartbeat is answered by the server without the engine: its cost is the transport's.
var emptyBeat = frontend.HeartbeatRequest{WorkerID: "w"}

// BenchmarkWorkerCall measures one worker-protocol round trip (client and server in this
// process) on the client's own connections and through net/http's Transport, 16 callers at once
// as in a busy worker.
func BenchmarkWorkerCall(b *testing.B) {
	for _, v := range []struct {
		name string
		opts []api.ClientOption
	}{{"own-conns", []api.ClientOption{api.WithoutFrames()}}, {"frames", nil}, {"net-http", []api.ClientOption{api.WithNetHTTP()}}} {
		b.Run(v.name, func(b *testing.B) {
			c := transportClient(b, v.opts...)
			b.SetParallelism(8)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.Heartbeat(context.Background(), emptyBeat); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// The worker protocol's calls go on connections the caller reads itself, which costs fewer
// allocations (and goroutine hand-offs) per call than net/http's Transport.
func TestWorkerCallsOnOwnConnections(t *testing.T) {
	allocs := func(opts ...api.ClientOption) float64 {
		c := transportClient(t, opts...)
		return testing.AllocsPerRun(200, func() {
			if _, err := c.Heartbeat(context.Background(), emptyBeat); err != nil {
				t.Fatal(err)
			}
		})
	}
	own, std := allocs(api.WithoutFrames()), allocs(api.WithNetHTTP())
	t.Logf("allocations per call (client and server): %.0f on own connections, %.0f through net/http", own, std)
	if own > std-20 {
		t.Fatalf("a call on the client's own connections allocates %.0f times, through net/http %.0f: want at least 20 fewer", own, std)
	}
}

// A kept connection that the server closed while it was idle (a restart, its idle timeout) is
// dropped before a call is put on it: the call succeeds on a new one instead of being lost.
func TestOwnConnectionClosedWhileIdle(t *testing.T) {
	ts, c := ownServer(t, 0, nil, api.WithoutFrames())
	for i := 0; i < 3; i++ {
		if _, err := c.Heartbeat(context.Background(), emptyBeat); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		ts.CloseClientConnections()
		time.Sleep(20 * time.Millisecond) // the close reaches the client's socket
	}
}

// A call whose context ends while the engine holds it (a long-poll) returns at once with the
// context's error, and the connection it held is not kept.
func TestOwnConnectionCallCancelled(t *testing.T) {
	c := transportClient(t, api.WithoutFrames())
	if _, err := c.DeclareManifest(context.Background(), frontend.Manifest{WorkerID: "w", Queues: []string{"q"}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 1, Wait: 20 * time.Second})
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled poll: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled poll did not return")
	}
	if _, err := c.Heartbeat(context.Background(), emptyBeat); err != nil {
		t.Fatalf("a call after the cancelled one: %v", err)
	}
}

// A record far over the server's body limit is refused with X_PAYLOAD_TOO_LARGE even though the
// server stops reading it and closes the connection while the client is still writing: the
// server's answer is read after the failed write.
func TestOwnConnectionBodyOverLimit(t *testing.T) {
	_, c := ownServer(t, 1024, nil, api.WithoutFrames())
	_, err := c.Record(context.Background(), frontend.RecordRequest{RunID: "r", Fence: 1,
		Commands: []frontend.Command{{Kind: frontend.CmdStep, Name: "s", Output: make([]byte, 16<<20)}}})
	if !jobs.HasCode(err, jobs.CodePayloadTooLarge) {
		t.Fatalf("a record of 16 MiB against a limit of 1 KiB: %v", err)
	}
}

// A kept connection is reused after its last call's deadline passed: the deadline goes with the
// call, so the next call finds the connection alive rather than dialling a new one.
func TestOwnConnectionKeptPastCallDeadline(t *testing.T) {
	var conns atomic.Int32
	_, c := ownServer(t, 0, func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}, api.WithTimeout(50*time.Millisecond), api.WithoutFrames())
	for i := 0; i < 3; i++ {
		if _, err := c.Heartbeat(context.Background(), emptyBeat); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		time.Sleep(100 * time.Millisecond) // past the call's deadline
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("3 calls opened %d connections, want 1", n)
	}
}
