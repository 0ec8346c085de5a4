package chaos

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tally counts heartbeats and session requests, and nothing else, across two clients (two
// worker processes) sharing one file.
func TestTallyCountsLivenessRequests(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer ts.Close()
	path := filepath.Join(t.TempDir(), "traffic")
	for _, paths := range [][]string{
		{"/v1/worker/heartbeat", "/v1/worker/poll", "/v1/worker/session", "/v1/worker/heartbeat"},
		{"/v1/worker/record", "/v1/worker/heartbeat", "/v1/runs"},
	} {
		hc, closeTally, err := TallyingClient(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			res, err := hc.Post(ts.URL+p, "application/msgpack", strings.NewReader(""))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
		}
		if err := closeTally(); err != nil {
			t.Fatal(err)
		}
	}
	hb, ss, cut, err := readTally(path)
	if err != nil || hb != 3 || ss != 1 || cut != 0 {
		t.Fatalf("tally: %d heartbeats, %d session requests (%v); want 3 and 1", hb, ss, err)
	}
	// A minute of one worker is six renewals; a session request every 30s adds two: 8/6.
	if r := trafficRatio(time.Minute, 2); r < 1.33 || r > 1.34 {
		t.Errorf("ratio %.3f, want 4/3", r)
	}
}

// The report judges both targets: a reclaim p99 over 5s, or liveness traffic over twice the
// heartbeats, is a broken invariant.
func TestReportJudgesReclaimAndTraffic(t *testing.T) {
	t.Parallel()
	ok := Report{Config: Config{Steps: 1}, Reclaims: []time.Duration{time.Second}, Heartbeats: 10, SessionRequests: 5, WorkerTime: 20 * time.Minute}
	if err := ok.Check(); err != nil {
		t.Fatalf("a report within both targets: %v", err)
	}
	for name, r := range map[string]Report{
		"slow reclaim":   {Config: Config{Steps: 1}, Reclaims: []time.Duration{6 * time.Second}, SessionRequests: 5, WorkerTime: 20 * time.Minute},
		"chatty session": {Config: Config{Steps: 1}, Reclaims: []time.Duration{time.Second}, SessionRequests: 121, WorkerTime: 20 * time.Minute},
	} {
		if err := r.Check(); err == nil {
			t.Errorf("%s: Check passed", name)
		}
	}
	short := Report{Config: Config{Steps: 1}, SessionRequests: 40, WorkerTime: time.Minute}
	if err := short.Check(); err != nil || !strings.Contains(short.Table(), "too short to judge") {
		t.Errorf("a minute of worker time is judged: %v\n%s", err, short.Table())
	}
	if tab := ok.Table(); !strings.Contains(tab, "target p99 ≤ 5s") || !strings.Contains(tab, "1.04×: 5 session requests in 20m0s of worker time, 0 of them reconnects after an engine kill (1.04× with them; 10 heartbeats sent)") {
		t.Errorf("table does not show the targets and the traffic:\n%s", tab)
	}
}

// A request that never reached the engine (nothing listens) is taken back out of the tally.
func TestTallySubtractsRefusedRequests(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	dead := ts.URL
	ts.Close()
	path := filepath.Join(t.TempDir(), "traffic")
	hc, closeTally, err := TallyingClient(path)
	if err != nil {
		t.Fatal(err)
	}
	defer closeTally()
	for _, p := range []string{"/v1/worker/heartbeat", "/v1/worker/session"} {
		if res, err := hc.Post(dead+p, "application/msgpack", strings.NewReader("")); err == nil {
			res.Body.Close()
			t.Fatalf("%s reached a closed server", p)
		}
	}
	if hb, ss, _, err := readTally(path); err != nil || hb != 0 || ss != 0 {
		t.Fatalf("tally after refused requests: %d heartbeats, %d session requests (%v); want none", hb, ss, err)
	}
}

// A session the engine cuts (it was killed mid-attend) is tallied as cut: the reconnect after it
// is the disruption's cost.
func TestTallyCountsCutSessions(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hj, ok := w.(http.Hijacker); ok {
			c, _, _ := hj.Hijack()
			c.Close() // the engine dies under the attend
		}
	}))
	defer ts.Close()
	path := filepath.Join(t.TempDir(), "traffic")
	hc, closeTally, err := TallyingClient(path)
	if err != nil {
		t.Fatal(err)
	}
	defer closeTally()
	if res, err := hc.Post(ts.URL+"/v1/worker/session", "application/msgpack", strings.NewReader("")); err == nil {
		res.Body.Close()
		t.Fatal("the cut session answered")
	}
	if _, ss, cut, err := readTally(path); err != nil || ss != 1 || cut != 1 {
		t.Fatalf("tally: %d session requests, %d cut (%v); want 1 and 1", ss, cut, err)
	}
	r := Report{Config: Config{Steps: 1}, SessionRequests: 150, SessionsCut: 100, WorkerTime: 20 * time.Minute}
	if err := r.Check(); err != nil {
		t.Errorf("reconnects after engine kills judged as session traffic: %v", err)
	}
}
