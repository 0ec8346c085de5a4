package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/race"
)

const connsWorkerToken = "worker-secret"

// rawGet sends a GET on c and reads its answer, within wait.
func rawGet(c net.Conn, br *bufio.Reader, addr, path, token string, wait time.Duration) (*http.Response, error) {
	req := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\n"
	if token != "" {
		req += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := c.Write([]byte(req + "\r\n")); err != nil {
		return nil, err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res, nil
}

// workerGets reports whether a worker with a valid token, on a fresh connection, is answered
// within wait.
func workerGets(addr string, wait time.Duration) error {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/whoami", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+connsWorkerToken)
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr, Timeout: wait}).Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return errors.New(res.Status)
	}
	return nil
}

// Clients without a valid token cannot take the connection slots (MaxConns) from the workers:
// whether they hold their connections after a refused request, after a probe that needs no
// token, or without sending anything, a worker with a valid token is served at once. A 401
// also ends its connection.
func TestUnauthenticatedClientsCannotLockOutWorkers(t *testing.T) {
	t.Parallel()
	const slots = 8
	for name, hold := range map[string]func(t *testing.T, c net.Conn, br *bufio.Reader, addr string){
		"refused": func(t *testing.T, c net.Conn, br *bufio.Reader, addr string) {
			res, err := rawGet(c, br, addr, "/v1/whoami", "wrong", 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != http.StatusUnauthorized || !res.Close {
				t.Fatalf("a bad token: %d, Connection %q; want 401 with Connection: close", res.StatusCode, res.Header.Get("Connection"))
			}
		},
		"probe": func(t *testing.T, c net.Conn, br *bufio.Reader, addr string) {
			res, err := rawGet(c, br, addr, "/healthz", "", 5*time.Second)
			if err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("/healthz without a token: %v %v", res, err)
			}
		},
		"silent": func(*testing.T, net.Conn, *bufio.Reader, string) {},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, addr := startServer(t, api.Config{MaxConns: slots,
				Credentials: []api.Credential{{Token: connsWorkerToken, Role: api.RoleWorker}}})
			for range slots {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				hold(t, c, bufio.NewReader(c), addr)
			}
			began := time.Now()
			if err := workerGets(addr, 2*time.Second); err != nil {
				t.Fatalf("a worker with a valid token, with every slot held by clients without one: %v after %v", err, time.Since(began))
			}
		})
	}
}

// A connection that carried an authenticated request is not closed to make room: with every
// slot held by authenticated clients, a newcomer waits (as past MaxConns it always did), and
// the held connections still serve.
func TestAuthenticatedConnectionsKeepTheirSlots(t *testing.T) {
	t.Parallel()
	_, addr := startServer(t, api.Config{MaxConns: 2,
		Credentials: []api.Credential{{Token: connsWorkerToken, Role: api.RoleWorker}}})
	slotsKept(t, addr, "/v1/whoami", connsWorkerToken)
}

// slotsKept fills a server's two connection slots with connections that each made an
// authenticated GET of path with token, and fails unless a newcomer then waits and the held
// connections still serve.
func slotsKept(t *testing.T, addr, path, token string) {
	t.Helper()
	type held struct {
		c  net.Conn
		br *bufio.Reader
	}
	var hs []held
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		h := held{c, bufio.NewReader(c)}
		if res, err := rawGet(h.c, h.br, addr, path, token, 5*time.Second); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s under the cap: %v %v", path, res, err)
		}
		hs = append(hs, h)
	}
	if err := workerGets(addr, 300*time.Millisecond); err == nil {
		t.Fatalf("a third connection took the slot of a connection authenticated by GET %s", path)
	}
	for i, h := range hs {
		if res, err := rawGet(h.c, h.br, addr, path, token, 5*time.Second); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("held connection %d after a newcomer waited: %v %v", i, res, err)
		}
	}
}

// A connection that has carried no authenticated request (a probe's) is closed after a few
// seconds idle; an authenticated one idle as long is kept.
func TestUnauthenticatedIdleConnectionIsClosed(t *testing.T) {
	t.Parallel()
	_, addr := startServer(t, api.Config{
		Credentials: []api.Credential{{Token: connsWorkerToken, Role: api.RoleWorker}}})
	dial := func(path, token string) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		br := bufio.NewReader(c)
		if res, err := rawGet(c, br, addr, path, token, 5*time.Second); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %v", path, res, err)
		}
		return c, br
	}
	probe, probeR := dial("/healthz", "")
	worker, workerR := dial("/v1/whoami", connsWorkerToken)
	began := time.Now()
	_ = probe.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := probeR.ReadByte(); err != io.EOF {
		t.Fatalf("the probe's idle connection: %v, want closed by the server", err)
	}
	if took := time.Since(began); took > 7*time.Second {
		t.Fatalf("the probe's idle connection was closed after %v, want a few seconds", took)
	}
	if res, err := rawGet(worker, workerR, addr, "/v1/whoami", connsWorkerToken, 5*time.Second); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the worker's connection, idle as long: %v %v", res, err)
	}
}

// allocated returns the bytes allocated while f ran (the process's, so the test does not run
// beside others).
func allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A JSON bulk enqueue over jobs.MaxEnqueueMany items is refused as the item past the limit is
// read: a body of empty items ({} is two bytes, so 2 MiB holds 700,000) is refused in a few
// megabytes, not after every item was decoded and converted (hundreds of megabytes, seconds).
func TestBulkEnqueueJSONRefusesPastTheLimitEarly(t *testing.T) {
	b := setup(t, api.Config{})
	var buf bytes.Buffer
	buf.WriteString(`{"items":[`)
	for buf.Len() < (2<<20)-8 {
		buf.WriteString(`{},`)
	}
	buf.WriteString(`{}]}`)
	var st int
	var out []byte
	began := time.Now()
	n := allocated(func() { st, _, out = b.call(t, http.MethodPost, "/v1/runs/bulk", api.ContentJSON, "", buf.Bytes()) })
	took := time.Since(began)
	if st != http.StatusRequestEntityTooLarge || jsonCode(t, out) != jobs.CodePayloadTooLarge {
		t.Fatalf("a bulk enqueue of 700,000 items: %d %s, want 413 X_PAYLOAD_TOO_LARGE", st, out)
	}
	t.Logf("refused in %v, %d MB allocated", took, n>>20)
	if !race.Enabled && n > 64<<20 {
		t.Fatalf("refusing a bulk enqueue of 700,000 items allocated %d MB; want under 64 MB (decoding every item first took 660 MB)", n>>20)
	}
}

// The same in msgpack: the items array's length is read before any item is decoded.
func TestBulkEnqueueMsgpackRefusesPastTheLimitEarly(t *testing.T) {
	b := setup(t, api.Config{})
	const items = jobs.MaxEnqueueMany + 10_000
	body := []byte{0x81, 0xa5, 'i', 't', 'e', 'm', 's', 0xdc, items >> 8, items & 0xff}
	body = append(body, bytes.Repeat([]byte{0x80}, items)...) // each an empty map
	var st int
	var out []byte
	n := allocated(func() { st, _, out = b.call(t, http.MethodPost, "/v1/runs/bulk", api.ContentMsgpack, "", body) })
	var e jobs.Error
	if err := msgpack.Unmarshal(out, &e); err != nil || st != http.StatusRequestEntityTooLarge || e.Code != jobs.CodePayloadTooLarge ||
		e.Message != fmt.Sprintf("bulk enqueue of %d items; the limit is %d", items, jobs.MaxEnqueueMany) {
		t.Fatalf("a msgpack bulk enqueue of %d items: %d %+v (%v), want 413 X_PAYLOAD_TOO_LARGE naming the count", items, st, e, err)
	}
	t.Logf("%d KB allocated", n>>10)
	if !race.Enabled && n > 4<<20 {
		t.Fatalf("refusing a msgpack bulk enqueue of %d empty items allocated %d MB; want under 4 MB", items, n>>20)
	}
}

// Reading the JSON bulk body item by item answers every body as decoding it whole did: no body
// or null is no items, the field's name is matched without regard to case, a repeated field
// keeps its last value, and an unknown field, trailing data or a body of another shape is a bad
// request; at the limit the items are each answered.
func TestBulkEnqueueJSONShapes(t *testing.T) {
	b := setup(t, api.Config{})
	item := `{"job":"bulk-note","key":"%s","noTenant":true,"input":{"id":"x"}}`
	for body, want := range map[string]int{
		``:                                       0,
		`null`:                                   0,
		`{}`:                                     0,
		`{"items":null}`:                         0,
		`{"items":[]}`:                           0,
		`{"ITEMS":[` + item + `]}`:               1,
		`{"items":[` + item + `,null]} `:         2,
		`{"items":[` + item + `],"items":[]}`:    0,
		`{"items":[],"items":[` + item + `]}`:    1,
		`{"items":[` + item + `],"other":1}`:     -1,
		`{"items":[{"job":"x","nope":1}]}`:       -1,
		`{"items":[{"job":1}]}`:                  -1,
		`{"items":[]} {}`:                        -1,
		`{"items":[]`:                            -1,
		`{"items":[}`:                            -1,
		`[]`:                                     -1,
		`"items"`:                                -1,
		`{"items":{}}`:                           -1,
		`{"items":"x"}`:                          -1,
		`{"items":[` + item + `]` + "\xff" + `}`: -1,
	} {
		body = strings.ReplaceAll(body, "%s", fmt.Sprintf("k%d", len(body)))
		st, _, out := b.call(t, http.MethodPost, "/v1/runs/bulk", api.ContentJSON, "", []byte(body))
		if want < 0 {
			if st != http.StatusBadRequest || jsonCode(t, out) != jobs.CodeBadRequest {
				t.Errorf("%s: %d %s, want 400 X_BAD_REQUEST", body, st, out)
			}
			continue
		}
		var resp api.BulkEnqueueResponse
		if st != http.StatusOK || json.Unmarshal(out, &resp) != nil || len(resp.Items) != want {
			t.Errorf("%s: %d %s, want 200 with %d items", body, st, out, want)
		}
	}
	// Exactly at the limit: each item answered (here, each refused for naming no job).
	var buf bytes.Buffer
	buf.WriteString(`{"items":[{}`)
	for range jobs.MaxEnqueueMany - 1 {
		buf.WriteString(`,{}`)
	}
	buf.WriteString(`]}`)
	st, _, out := b.call(t, http.MethodPost, "/v1/runs/bulk", api.ContentJSON, "", buf.Bytes())
	var resp api.BulkEnqueueResponse
	if st != http.StatusOK || json.Unmarshal(out, &resp) != nil || len(resp.Items) != jobs.MaxEnqueueMany ||
		resp.Items[0].Error == nil || resp.Items[0].Error.Code != jobs.CodeBadRequest {
		t.Fatalf("a bulk enqueue of exactly %d items: %d, %d items", jobs.MaxEnqueueMany, st, len(resp.Items))
	}
}

// A session's worker id is bounded (1,000 bytes) at the API as in the engine: attends under
// megabyte ids are refused, and pin nothing.
func TestSessionWorkerIDIsBoundedOverHTTP(t *testing.T) {
	b := setup(t, api.Config{})
	ctx := t.Context()
	long := strings.Repeat("w", 1001)
	for name, call := range map[string]func() error{
		"start":  func() error { return b.client.WorkerStart(ctx, frontend.Session{WorkerID: long}) },
		"stop":   func() error { return b.client.WorkerStop(ctx, frontend.Session{WorkerID: long}) },
		"attend": func() error { return b.client.Attend(ctx, frontend.Session{WorkerID: long, Wait: time.Nanosecond}) },
	} {
		if err := call(); !jobs.HasCode(err, jobs.CodeBadRequest) {
			t.Errorf("%s under a 1,001-byte worker id: %v, want X_BAD_REQUEST", name, err)
		}
	}
	huge := strings.Repeat("w", 1<<20)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range 20 {
		if err := b.client.Attend(ctx, frontend.Session{WorkerID: fmt.Sprintf("%04d", i) + huge, Wait: time.Nanosecond}); !jobs.HasCode(err, jobs.CodeBadRequest) {
			t.Fatalf("an attend under a 1 MiB worker id: %v, want X_BAD_REQUEST", err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); !race.Enabled && grew > 8<<20 {
		t.Fatalf("the heap grew by %d MB after 20 attends under 1 MiB ids; want under 8 MB (they were kept: 20 MB)", grew>>20)
	}
	if err := b.client.Attend(ctx, frontend.Session{WorkerID: strings.Repeat("w", 1000), Wait: time.Nanosecond}); err != nil {
		t.Fatalf("an attend under a 1,000-byte worker id: %v", err)
	}
}

// The console's own login counts as authentication: a connection whose console requests carried
// a valid credential keeps its slot when the connections are at their cap, as an API client's
// does. The console checks its credential itself, so its connections counted as never
// authenticated: idled out in seconds and given away to any newcomer.
func TestConsoleConnectionsKeepTheirSlots(t *testing.T) {
	t.Parallel()
	const viewer = "viewer-secret"
	_, addr := startServer(t, api.Config{MaxConns: 2, Credentials: []api.Credential{
		{Token: connsWorkerToken, Role: api.RoleWorker}, {Token: viewer, Role: api.RoleViewer}}})
	slotsKept(t, addr, "/_x/", viewer)
}
