package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// The fuzz targets below hold the server to "malformed input is a 4xx with a code, never a 500,
// never a crash". `go test` runs their seeds (and testdata/fuzz/); `go test -fuzz FuzzX ./api`
// explores further.

func fuzzServer(f *testing.F) *Server {
	env := testenv.Start(f, testenv.Options{Store: memory.New()})
	// A tiny poll cap: a fuzzed Wait must not make one input take 30 seconds.
	s, err := NewServer(Config{Engine: env.Engine, Logger: env.Logger, MaxPollWait: time.Nanosecond, MaxBody: 64 << 10})
	if err != nil {
		f.Fatal(err)
	}
	return s
}

var workerPaths = []string{"/v1/worker/poll", "/v1/worker/record", "/v1/worker/heartbeat", "/v1/worker/history", "/v1/worker/manifest"}

func mustMsgpack(v any) []byte {
	b, err := msgpack.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func FuzzWorkerProtocol(f *testing.F) {
	s := fuzzServer(f)
	seeds := [][]byte{
		mustMsgpack(frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 3, Wait: time.Second}),
		mustMsgpack(frontend.PollRequest{WorkerID: "w", Queues: []string{"q", "\x00"}, Max: -1, Wait: -time.Hour}),
		mustMsgpack(frontend.RecordRequest{RunID: "r", Fence: 1, WorkerID: "w", Commands: []frontend.Command{
			{Kind: frontend.CmdStep, Name: "s", Output: []byte{0xc0}},
			{Kind: frontend.CmdWait, Name: "w", Event: "e", Match: []string{"a=1"}, TimeoutAt: time.Unix(1, 0)},
		}}),
		mustMsgpack(frontend.RecordRequest{RunID: "r", Commands: []frontend.Command{{Kind: "explode"}}}),
		mustMsgpack(frontend.RecordRequest{RunID: "r", Fence: 1, WorkerID: "w", AfterSeq: 1, Commands: []frontend.Command{
			{Kind: frontend.CmdStepFailed, Name: "s", Code: "X_\x00", Error: string(bytes.Repeat([]byte{0xff}, 70000)), Parallel: true},
			{Kind: frontend.CmdStepFailed, Name: "\x00"},
			{Kind: frontend.CmdStep, Name: "s", Output: []byte{0xc0}},
		}}),
		mustMsgpack(frontend.HeartbeatRequest{WorkerID: "w", Leases: []frontend.Lease{{RunID: "r", Fence: 2}}}),
		mustMsgpack(HistoryRequest{RunID: "r", AfterSeq: -5}),
		{},
		{0xc1},
		{0x81, 0xa1},
		// Array headers claiming 2^32-1 and 2^16-1 items: the allocation bombs the shape check stops.
		{0xdd, 0xff, 0xff, 0xff, 0xff},
		{0x81, 0xa8, 'c', 'o', 'm', 'm', 'a', 'n', 'd', 's', 0xdc, 0xff, 0xff},
		{0xdf, 0x7f, 0xff, 0xff, 0xff},
		bytes.Repeat([]byte{0x91}, 1000),
		[]byte(`{"worker_id":"w"}`),
		mustMsgpack(frontend.Manifest{WorkerID: "w", Queues: []string{"q"}, Declarations: []jobs.Declaration{
			{Kind: "job", Name: "j", Data: []byte(`{"queue":"q","attempts":3}`), Checksum: jobs.Checksum([]byte(`{"queue":"q","attempts":3}`))},
			{Kind: "schedule", Name: "s", Data: []byte(`{"cron":"* * * * *"}`), Checksum: "forged"},
			{Kind: "job", Name: "\x00", Data: []byte(`not json`)},
		}}),
		mustMsgpack(frontend.Manifest{WorkerID: "w", Queues: []string{"q"}, Declarations: []jobs.Declaration{
			{Kind: "job", Name: "j", Data: []byte(`{"queue":"","attempts":-1,"concurrency":-5}`), Checksum: jobs.Checksum([]byte(`{"queue":"","attempts":-1,"concurrency":-5}`))},
		}}),
		mustMsgpack(frontend.RecordRequest{RunID: "r", Fence: 1, WorkerID: "w", LeaseToken: "forged", AfterSeq: 1,
			Commands: []frontend.Command{{Kind: frontend.CmdSleep, Name: "s", WakeAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}}}),
		mustMsgpack(frontend.HeartbeatRequest{WorkerID: "w", Leases: []frontend.Lease{{RunID: "r", Fence: 1, Token: "forged", Slot: "job:x", Limit: -1}}}),
	}
	for _, b := range seeds {
		for i := range workerPaths {
			f.Add(uint8(i), b)
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		path := workerPaths[int(route)%len(workerPaths)]
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+path, bytes.NewReader(body))
		req.RemoteAddr = "127.0.0.1:1" // a loopback client: the server has no token
		req.Header.Set("Content-Type", ContentMsgpack)
		rec := httptest.NewRecorder()
		began := time.Now()
		s.ServeHTTP(rec, req)
		if took := time.Since(began); took > 5*time.Second {
			t.Fatalf("POST %s %x took %s: a malformed request must not hold the server", path, body, took)
		}
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("POST %s %x = %d %s", path, body, rec.Code, rec.Body)
		}
		if rec.Code != http.StatusOK {
			var e jobs.Error
			if err := msgpack.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" {
				t.Fatalf("POST %s %x = %d with a body that is no msgpack refusal: %q", path, body, rec.Code, rec.Body)
			}
		}
	})
}

func FuzzAdminAPI(f *testing.F) {
	s := fuzzServer(f)
	type seed struct {
		route      uint8
		id, query  string
		body       []byte
		msgpackReq bool
	}
	seeds := []seed{
		{0, "", "", []byte(`{"job":"j","key":"k","tenant":"t","input":{"a":1},"delay":"1s"}`), false},
		{0, "", "", []byte(`{"job":"j","key":"k","noTenant":true,"delay":1e300}`), false},
		{0, "", "", []byte(`{"job":"j","key":"k","noTenant":true,"input":[[[[[[[[[[]]]]]]]]]]}`), false},
		{0, "", "", mustMsgpack(jobs.EnqueueRequest{Job: "j", Key: "k", NoTenant: true, Input: []byte{0xdd, 0xff}}), true},
		{0, "", "", mustMsgpack(jobs.EnqueueRequest{Job: "j", Key: "k", NoTenant: true, Delay: -1}), true},
		{1, "", "", []byte(`{"orderId":"o-1","amount":12}`), false},
		{1, "", "", []byte{0x81, 0xa1, 'a', 0x01}, true},
		{2, "r", "", []byte(`{"reason":"x"}`), false},
		{2, "\x00", "", []byte(`{"reason":7}`), false},
		{3, "r", "", []byte(`{"fromStep":"s","by":"me"}`), false},
		{4, "", "state=ready&limit=2&before=zz", nil, false},
		{4, "", "limit=-1&state=%00", nil, false},
		{4, "", "limit=99999999999999999999", nil, false},
		{5, "", "queue=q&limit=500", nil, false},
		{6, "r", "format=json", nil, false},
		{6, "..", "format=%ff", nil, false},
		{7, "r", "", nil, false},
	}
	for _, sd := range seeds {
		f.Add(sd.route, sd.id, sd.query, sd.body, sd.msgpackReq)
	}
	f.Fuzz(func(t *testing.T, route uint8, id, query string, body []byte, msgpackReq bool) {
		esc := url.PathEscape(id)
		var method, path string
		switch route % 8 {
		case 0:
			method, path = http.MethodPost, "/v1/runs"
		case 1:
			method, path = http.MethodPost, "/v1/events/"+esc
		case 2:
			method, path = http.MethodPost, "/v1/runs/"+esc+"/cancel"
		case 3:
			method, path = http.MethodPost, "/v1/runs/"+esc+"/retry"
		case 4:
			method, path = http.MethodGet, "/v1/runs"
		case 5:
			method, path = http.MethodGet, "/v1/dead-letters"
		case 6:
			method, path = http.MethodGet, "/v1/runs/"+esc+"/history"
		case 7:
			method, path = http.MethodGet, "/v1/runs/"+esc
		}
		u := &url.URL{Path: "/", RawQuery: url.PathEscape(query)}
		target := path + "?" + u.RawQuery
		req, err := http.NewRequest(method, "http://127.0.0.1"+target, bytes.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		if msgpackReq {
			req.Header.Set("Content-Type", ContentMsgpack)
		} else {
			req.Header.Set("Content-Type", ContentJSON)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q = %d %s", method, target, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && !msgpackReq {
			var eb ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error == nil || eb.Error.Code == "" {
				t.Fatalf("%s %s = %d with a body that is no JSON refusal: %q", method, target, rec.Code, rec.Body)
			}
		}
	})
}

// FuzzCheckMsgpack holds the shape check to msgpack's own reading: whatever it lets through is
// exactly one value that the decoder can skip to the end.
func FuzzCheckMsgpack(f *testing.F) {
	for _, b := range [][]byte{
		mustMsgpack(map[string]any{"a": []any{1, "x", 2.5, nil, true, []byte{1}}, "t": time.Unix(5, 7)}),
		mustMsgpack(frontend.RecordRequest{RunID: "r", Commands: []frontend.Command{{Kind: "step"}}}),
		{0xd4, 0x01, 0x02}, {0xc7, 0x00, 0x05}, {0xdd, 0, 0, 0, 1, 0xc0}, {0x92, 0xc0}, {0xc0, 0xc0},
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if checkMsgpack(b) != nil {
			return
		}
		rd := bytes.NewReader(b)
		dec := msgpack.NewDecoder(rd)
		if err := dec.Skip(); err != nil {
			t.Fatalf("checkMsgpack accepted %x, which msgpack cannot skip: %v", b, err)
		}
		if rd.Len() != 0 {
			t.Fatalf("checkMsgpack accepted %x with data after the value", b)
		}
	})
}
