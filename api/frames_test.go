package api_test

import (
	"bufio"
	"context"
	"encoding/binary"
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
	"go.opentelemetry.io/otel/trace"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// plainCount counts the plain HTTP requests a server is sent, by path; refuse, when set, answers
// a path 404 as an engine without the route would.
type plainCount struct {
	next   http.Handler
	refuse string
	mu     sync.Mutex
	n      map[string]int
}

func (p *plainCount) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.n[r.URL.Path]++
	p.mu.Unlock()
	if r.URL.Path == p.refuse {
		http.NotFound(w, r)
		return
	}
	p.next.ServeHTTP(w, r)
}

func (p *plainCount) count(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[path]
}

// framedServer serves an engine on a memory store, counting its plain requests, and returns a
// client of it built with token and opts.
func framedServer(t *testing.T, cfg api.Config, refuse, token string, opts ...api.ClientOption) (*testenv.Env, *api.Server, *plainCount, *api.Client, string) {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	cfg.Engine, cfg.Logger, cfg.NoUI = env.Engine, env.Logger, true
	srv, err := api.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pc := &plainCount{next: srv, refuse: refuse, n: map[string]int{}}
	ts := httptest.NewServer(pc)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain) // ends the upgraded connections before httptest closes
	c, err := api.NewClient(ts.URL, token, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return env, srv, pc, c, ts.URL
}

// By default, a remote worker's records go as frames on a few upgraded connections, not one
// request each, and every run's history is exactly what plain records write.
func TestFramedWorkerRecords(t *testing.T) {
	t.Parallel()
	env, _, pc, c, _ := framedServer(t, api.Config{}, "", "")
	reg, err := jobs.NewRegistry(batchedJob)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, worker.Config{Frontend: c, Registry: reg, Clock: env.Clock, Logger: env.Logger,
		PollWait: time.Second, Concurrency: 8})
	const runs = 8
	ids := make([]string, runs)
	for i := range ids {
		res, err := batchedJob.Enqueue(t.Context(), env.Engine, i)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = res.RunID
	}
	for i, id := range ids {
		run := env.Await(id, store.StateCompleted)
		var got int
		if err := jobs.Decode(run.Result, &got); err != nil {
			t.Fatal(err)
		}
		if want := i + (i + 0) + (i + 1) + (i + 2) + (i + 3); got != want {
			t.Errorf("run %d: result %d, want %d", i, got, want)
		}
		kinds := testenv.Kinds(env.History(id))
		want := []string{string(history.KindRunStarted), "StepCompleted:s0", "StepCompleted:s1", "StepCompleted:s2", "StepCompleted:s3", string(history.KindRunCompleted)}
		if fmt.Sprint(kinds) != fmt.Sprint(want) {
			t.Errorf("run %d: history %v, want %v", i, kinds, want)
		}
	}
	plain, upgrades := pc.count("/v1/worker/record"), pc.count("/v1/worker/frames")
	t.Logf("%d records: %d plain requests, %d upgraded connections", runs*5, plain, upgrades)
	if plain != 0 {
		t.Errorf("%d records went as plain requests; want all framed", plain)
	}
	if upgrades == 0 || upgrades > runs+2 {
		t.Errorf("%d upgraded connections for %d runs at once", upgrades, runs)
	}
}

// A framed record is refused as a plain one is: the same code, nothing changed; and the engine
// still refuses a stale fence framed.
func TestFramedRecordRefusals(t *testing.T) {
	t.Parallel()
	env, _, pc, c, url := framedServer(t, api.Config{}, "", "")
	testenv.Declare(t, env.Engine, "w1", batchedJob)
	if _, err := batchedJob.Enqueue(t.Context(), env.Engine, 1); err != nil {
		t.Fatal(err)
	}
	var tasks []frontend.Task
	for len(tasks) == 0 {
		got, err := c.Poll(t.Context(), frontend.PollRequest{WorkerID: "w1", Queues: []string{jobs.DefaultQueue}, Max: 1, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		tasks = got
	}
	task := tasks[0]
	out, _ := jobs.Encode(1)
	rec := func(fence int64) frontend.RecordRequest {
		return frontend.RecordRequest{RunID: task.RunID, Fence: fence, AfterSeq: task.LastSeq, WorkerID: "w1",
			LeaseToken: task.LeaseToken, Commands: []frontend.Command{{Kind: frontend.CmdStep, Name: "s0", Output: out}}}
	}
	plainClient, err := api.NewClient(url, "", api.WithoutFrames())
	if err != nil {
		t.Fatal(err)
	}
	defer plainClient.Close()
	_, plainErr := plainClient.Record(t.Context(), rec(task.Fence+7))
	_, framedErr := c.Record(t.Context(), rec(task.Fence+7))
	if jobs.CodeOf(framedErr) == "" || jobs.CodeOf(framedErr) != jobs.CodeOf(plainErr) {
		t.Fatalf("a stale fence framed: %v; plain: %v", framedErr, plainErr)
	}
	if got := len(env.History(task.RunID)); got != 1 {
		t.Fatalf("the refused records' run holds %d events, want only RunStarted", got)
	}
	bad := rec(task.Fence)
	bad.RunID = ""
	if _, err := c.Record(t.Context(), bad); !jobs.HasCode(err, jobs.CodeBadRequest) {
		t.Errorf("a record naming no run, framed: %v; want X_BAD_REQUEST", err)
	}
	resp, err := c.Record(t.Context(), rec(task.Fence))
	if err != nil || len(resp.Appended) != 1 {
		t.Fatalf("the valid record framed: %+v, %v", resp, err)
	}
	if got := len(env.History(task.RunID)); got != 2 {
		t.Errorf("the run holds %d events after its step, want 2", got)
	}
	if n := pc.count("/v1/worker/record"); n != 1 {
		t.Errorf("%d plain record requests; want only the plain client's", n)
	}
}

// An engine without the route answers the upgrade 404: the client asks once, then sends its
// calls as plain requests.
func TestFramesFallBackOnOldEngine(t *testing.T) {
	t.Parallel()
	_, _, pc, c, _ := framedServer(t, api.Config{}, "/v1/worker/frames", "")
	for i := 0; i < 5; i++ {
		if _, err := c.Heartbeat(t.Context(), emptyBeat); err != nil {
			t.Fatal(err)
		}
	}
	if n := pc.count("/v1/worker/frames"); n != 1 {
		t.Errorf("%d upgrades asked of an engine without the route; want 1", n)
	}
	if n := pc.count("/v1/worker/heartbeat"); n != 5 {
		t.Errorf("%d plain heartbeats; want 5", n)
	}
}

// The upgrade passes the same credential check as any request: a wrong token gets the plain
// refusal, a viewer may not upgrade, a worker token is served framed.
func TestFramesCredentials(t *testing.T) {
	t.Parallel()
	cfg := api.Config{Credentials: []api.Credential{{Token: "wt", Role: api.RoleWorker}, {Token: "vt", Role: api.RoleViewer}}}
	_, _, pc, c, url := framedServer(t, cfg, "", "nope")
	if _, err := c.Heartbeat(t.Context(), emptyBeat); !jobs.HasCode(err, jobs.CodeUnauthorized) {
		t.Errorf("a wrong token: %v; want X_UNAUTHORIZED", err)
	}
	viewer, err := api.NewClient(url, "vt")
	if err != nil {
		t.Fatal(err)
	}
	defer viewer.Close()
	if _, err := viewer.Heartbeat(t.Context(), emptyBeat); !jobs.HasCode(err, jobs.CodeForbidden) {
		t.Errorf("a viewer's heartbeat: %v; want X_FORBIDDEN", err)
	}
	worker, err := api.NewClient(url, "wt")
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	before := pc.count("/v1/worker/heartbeat")
	for i := 0; i < 3; i++ {
		if _, err := worker.Heartbeat(t.Context(), emptyBeat); err != nil {
			t.Fatal(err)
		}
	}
	if n := pc.count("/v1/worker/heartbeat") - before; n != 0 {
		t.Errorf("%d of the worker's heartbeats went plain; want all framed", n)
	}
}

// A drain ends the idle upgraded connections; the client's next call still gets its answer.
func TestFramesDrain(t *testing.T) {
	t.Parallel()
	_, srv, _, c, _ := framedServer(t, api.Config{}, "", "")
	if _, err := c.Heartbeat(t.Context(), emptyBeat); err != nil {
		t.Fatal(err)
	}
	srv.Drain()
	time.Sleep(50 * time.Millisecond) // the server closes the idle connection
	if _, err := c.Heartbeat(t.Context(), emptyBeat); err != nil {
		t.Errorf("a heartbeat after the drain: %v", err)
	}
}

// A call under a span goes as a plain request, which carries the span; the rest go framed.
func TestFramesLeaveTracedCallsPlain(t *testing.T) {
	t.Parallel()
	_, _, pc, c, _ := framedServer(t, api.Config{}, "", "")
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	traced := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	if _, err := c.Heartbeat(traced, emptyBeat); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(t.Context(), emptyBeat); err != nil {
		t.Fatal(err)
	}
	if n := pc.count("/v1/worker/heartbeat"); n != 1 {
		t.Errorf("%d plain heartbeats; want the traced one only", n)
	}
}

// Bad frames are refused, never served: a route the engine does not frame gets X_BAD_REQUEST
// and the connection goes on; a body over the limit gets X_PAYLOAD_TOO_LARGE and the connection
// ends; a record's refusal comes back in msgpack.
func TestFramesRefuseBadFrames(t *testing.T) {
	t.Parallel()
	_, _, _, _, url := framedServer(t, api.Config{MaxBody: 1 << 10}, "", "")
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	fmt.Fprintf(conn, "POST /v1/worker/frames HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/msgpack\r\nContent-Length: 0\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", api.FramesProtocol)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v, %v", res, err)
	}
	call := func(route byte, body []byte, declared int) (int, *jobs.Error) {
		t.Helper()
		head := make([]byte, 5)
		binary.BigEndian.PutUint32(head, uint32(declared))
		head[4] = route
		if _, err := conn.Write(append(head, body...)); err != nil {
			t.Fatal(err)
		}
		ah := make([]byte, 6)
		if _, err := io.ReadFull(br, ah); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, binary.BigEndian.Uint32(ah))
		if _, err := io.ReadFull(br, b); err != nil {
			t.Fatal(err)
		}
		var e jobs.Error
		if err := msgpack.Unmarshal(b, &e); err != nil {
			t.Fatal(err)
		}
		return int(binary.BigEndian.Uint16(ah[4:])), &e
	}
	if status, e := call(9, []byte{0x80}, 1); status != http.StatusBadRequest || e.Code != jobs.CodeBadRequest {
		t.Errorf("an unknown route: %d %+v; want 400 X_BAD_REQUEST", status, e)
	}
	if status, e := call(1, []byte{0xc1}, 1); status != http.StatusBadRequest || e.Code != jobs.CodeBadRequest {
		t.Errorf("a record of malformed msgpack: %d %+v; want 400 X_BAD_REQUEST", status, e)
	}
	// A nil where a time belongs: msgpack's decoder panics on it, which must not be a 500. Read
	// as the zero time by the record codec; with a key the codec leaves to msgpack's decoder,
	// refused.
	for _, body := range nilTimeRecords() {
		if status, e := call(1, body, len(body)); status >= 500 {
			t.Errorf("a record with a nil time: %d %+v; want no 5xx", status, e)
		}
	}
	if status, e := call(1, nil, 1<<20); status != http.StatusRequestEntityTooLarge || e.Code != jobs.CodePayloadTooLarge {
		t.Errorf("a body over the limit: %d %+v; want 413 X_PAYLOAD_TOO_LARGE", status, e)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after a body over the limit the connection should end: %v", err)
	}
}

// An upgrade that carries a body, or names another protocol, is refused and nothing is upgraded.
func TestFramesUpgradeRefused(t *testing.T) {
	t.Parallel()
	_, _, _, _, url := framedServer(t, api.Config{}, "", "")
	for _, v := range []struct{ upgrade, body string }{{api.FramesProtocol, "\x80"}, {"websocket", ""}} {
		req, err := http.NewRequest(http.MethodPost, url+"/v1/worker/frames", strings.NewReader(v.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", api.ContentMsgpack)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", v.upgrade)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("upgrade %q with body %q: status %d, want 400", v.upgrade, v.body, res.StatusCode)
		}
	}
}

// Stop ends the idle upgraded connections and returns; net/http's Shutdown alone would not wait
// for them, nor could it close them.
func TestFramesStop(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Addr: "127.0.0.1:0", NoUI: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	c, err := api.NewClient("http://"+srv.Addr(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 3; i++ {
		if _, err := c.Heartbeat(t.Context(), emptyBeat); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	began := time.Now()
	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v after %s", err, time.Since(began))
	}
	if _, err := c.Heartbeat(t.Context(), emptyBeat); err == nil {
		t.Error("a heartbeat after Stop was answered")
	}
}

// A framed call costs few allocations, client and server together: the request is encoded into
// a pooled buffer, the answer read into its connection's own and decoded there, the body decoded
// in place on the server and the answer encoded straight into the frame. (It was 40.)
func TestFramedCallAllocations(t *testing.T) {
	c := transportClient(t)
	framed := testing.AllocsPerRun(200, func() {
		if _, err := c.Heartbeat(context.Background(), emptyBeat); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("allocations per framed call (client and server): %.0f", framed)
	if framed > 32 {
		t.Fatalf("a framed call allocates %.0f times: want at most 32", framed)
	}
}

var bigInputJob = jobs.MustDefine("frames-big-input", func(s string) string { return fmt.Sprint(len(s)) }, jobs.NoTenant[string](),
	func(*jobs.Ctx, string) (int, error) { return 0, nil })

// A connection reuses its answer buffer from call to call: answers of every size, larger and
// smaller than the last and than what it keeps, refusals between them, all decode exactly.
func TestFramedAnswersOfEverySize(t *testing.T) {
	t.Parallel()
	env, _, pc, c, _ := framedServer(t, api.Config{}, "", "")
	var ids []string
	for _, n := range []int{200 << 10, 10, 70 << 10, 3 << 10} {
		res, err := bigInputJob.Enqueue(t.Context(), env.Engine, strings.Repeat("x", n))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.RunID)
	}
	for round := 0; round < 3; round++ {
		for _, i := range []int{0, 1, 2, 1, 3, 0, 3} {
			got, err := c.History(t.Context(), ids[i], 0)
			if err != nil {
				t.Fatalf("history of run %d: %v", i, err)
			}
			want := env.History(ids[i])
			gb, _ := msgpack.Marshal(got)
			wb, _ := msgpack.Marshal(want)
			if string(gb) != string(wb) {
				t.Fatalf("round %d, run %d: %d events (%d bytes) read framed, want %d (%d bytes)", round, i, len(got), len(gb), len(want), len(wb))
			}
		}
		if _, err := c.History(t.Context(), "no-such-run", 0); jobs.CodeOf(err) != jobs.CodeRunNotFound {
			t.Fatalf("history of an unknown run: %v, want %s", err, jobs.CodeRunNotFound)
		}
	}
	if plain := pc.count("/v1/worker/history"); plain != 0 {
		t.Errorf("%d history reads went plain; want all framed", plain)
	}
}

// nilTimeRecords are records with a nil where a time belongs: alone, and beside a key the
// record codec does not know (so that msgpack's decoder reads it).
func nilTimeRecords() [][]byte {
	enc := func(v any) []byte { b, _ := msgpack.Marshal(v); return b }
	return [][]byte{
		enc(map[string]any{"run_id": "r", "worker_id": "w", "commands": []any{map[string]any{"kind": "sleep", "name": "a", "wake_at": nil}}}),
		enc(map[string]any{"run_id": "r", "worker_id": "w", "unknown": 1, "commands": []any{map[string]any{"kind": "sleep", "name": "a", "wake_at": nil}}}),
	}
}

// The same on the plain route.
func TestRecordWithANilTime(t *testing.T) {
	t.Parallel()
	_, _, _, _, url := framedServer(t, api.Config{}, "", "")
	for i, body := range nilTimeRecords() {
		res, err := http.Post(url+"/v1/worker/record", api.ContentMsgpack, strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode >= 500 {
			t.Errorf("record %d with a nil time: %d %s; want no 5xx", i, res.StatusCode, b)
		}
	}
}
