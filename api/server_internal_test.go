package api

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
)

func TestPanicIsALogged500(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	s := &Server{log: slog.New(slog.NewTextHandler(&logs, nil))}
	h := s.recover(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/runs", nil))
	var eb ErrorBody
	if rec.Code != http.StatusInternalServerError || json.Unmarshal(rec.Body.Bytes(), &eb) != nil || eb.Error.Code != jobs.CodeInternal {
		t.Fatalf("panic = %d %s; want 500 X_INTERNAL", rec.Code, rec.Body)
	}
	if !strings.Contains(logs.String(), "jobs.api.panic") || !strings.Contains(logs.String(), "boom") {
		t.Fatalf("the panic was not logged: %s", logs.String())
	}
	// The panic's text stays in the log: an answer does not describe the server's insides.
	if strings.Contains(rec.Body.String(), "boom") {
		t.Fatalf("the answer leaks the panic: %s", rec.Body)
	}
}

func TestEveryCodeHasAStatus(t *testing.T) {
	t.Parallel()
	for _, c := range jobs.Codes() {
		st, ok := statusByCode[c.Code]
		if !ok {
			t.Errorf("%s has no HTTP status in statusByCode", c.Code)
			continue
		}
		// A retryable code must not read as "do not send that again" to a proxy, nor a
		// terminal one as "try later": except the conflicts, which the worker reads by code.
		if c.Code == jobs.CodeInternal || c.Code == jobs.CodeInvariant {
			if st != http.StatusInternalServerError {
				t.Errorf("%s → %d, want 500", c.Code, st)
			}
			continue
		}
		if st == http.StatusInternalServerError {
			t.Errorf("%s → 500: only a bug is a 500", c.Code)
		}
	}
	if StatusOf("X_SOMETHING_AN_APP_DEFINED") != http.StatusBadRequest {
		t.Error("an unknown code should be a 400")
	}
	for _, c := range []jobs.Code{jobs.CodeStoreUnavailable, jobs.CodeDraining} {
		if StatusOf(c) != http.StatusServiceUnavailable {
			t.Errorf("%s → %d, want 503", c, StatusOf(c))
		}
	}
}

func TestCheckMsgpack(t *testing.T) {
	t.Parallel()
	good := [][]byte{
		mustMsgpack(frontend.RecordRequest{RunID: "r", Commands: []frontend.Command{{Kind: "step", WakeAt: time.Unix(9, 1)}}}),
		mustMsgpack(map[string]any{"s": strings.Repeat("x", 70000), "b": make([]byte, 300), "f": 1.5, "n": -3, "u": uint64(1) << 60}),
		{0xc0},
	}
	for _, b := range good {
		if err := checkMsgpack(b); err != nil {
			t.Errorf("%x: %v", b[:min(len(b), 16)], err)
		}
	}
	bad := map[string][]byte{
		"empty":             {},
		"reserved":          {0xc1},
		"truncated str":     {0xa5, 'a'},
		"truncated length":  {0xda, 0x01},
		"trailing":          {0xc0, 0xc0},
		"array32 bomb":      {0xdd, 0xff, 0xff, 0xff, 0xff},
		"map32 bomb":        {0xdf, 0x00, 0x10, 0x00, 0x00},
		"more than 65536":   append([]byte{0xdd, 0x00, 0x01, 0x00, 0x01}, make([]byte, 65537)...),
		"nested too deep":   append(bytes.Repeat([]byte{0x91}, 40), 0xc0),
		"truncated ext":     {0xc7, 0x05, 0x01},
		"truncated fixext":  {0xd8, 0x01, 0x02},
		"missing map value": {0x81, 0xa1, 'a'},
	}
	for name, b := range bad {
		err := checkMsgpack(b)
		if !jobs.HasCode(err, jobs.CodeBadRequest) {
			t.Errorf("%s: %v, want X_BAD_REQUEST", name, err)
		}
	}
}

func TestErrorWireFormats(t *testing.T) {
	t.Parallel()
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	refused := jobs.Errorf(jobs.CodeRateLimited, "slow down")
	refused.RetryAfter = 1500 * time.Millisecond

	rec := httptest.NewRecorder()
	s.writeError(rec, httptest.NewRequest(http.MethodPost, "/v1/worker/record", nil), refused)
	var e jobs.Error
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Content-Type") != ContentMsgpack ||
		msgpack.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Code != jobs.CodeRateLimited || rec.Header().Get("Retry-After") != "2" {
		t.Fatalf("msgpack refusal = %d %v %q", rec.Code, rec.Header(), rec.Body)
	}
	back := refusal(rec.Code, rec.Header().Get("Content-Type"), rec.Header(), rec.Body.Bytes())
	if !jobs.HasCode(back, jobs.CodeRateLimited) || back.(*jobs.Error).RetryAfter != refused.RetryAfter {
		t.Fatalf("client reads %#v", back)
	}

	// A plain error is a bug: 500 X_INTERNAL, its text kept out of the answer.
	rec = httptest.NewRecorder()
	s.writeError(rec, httptest.NewRequest(http.MethodGet, "/v1/runs", nil), io.ErrUnexpectedEOF)
	var eb ErrorBody
	if rec.Code != http.StatusInternalServerError || json.Unmarshal(rec.Body.Bytes(), &eb) != nil || eb.Error.Code != jobs.CodeInternal {
		t.Fatalf("plain error = %d %s", rec.Code, rec.Body)
	}

	// A proxy's page in place of the engine's answer still yields a code the worker retries.
	back = refusal(http.StatusBadGateway, "text/html", http.Header{}, []byte("<html>bad gateway</html>"))
	if !jobs.HasCode(back, jobs.CodeStoreUnavailable) {
		t.Fatalf("proxy 502 reads as %v", back)
	}
	// Another web server at the address: its page is not printed, the refusal says what it is.
	page := "<!DOCTYPE HTML>\n<html>\n<head><title>Error response</title></head>\n<body>\n<h1>Error response</h1>\n<p>Error code: 404</p>\n</body>\n</html>\n"
	back = refusal(http.StatusNotFound, "text/html;charset=utf-8", http.Header{}, []byte(page))
	if msg := back.Error(); strings.Contains(msg, "<") || strings.Contains(msg, "\n") || !strings.Contains(msg, "not answer as a jobs engine") {
		t.Fatalf("another server's page reads as %q", msg)
	}
	// Plain text from elsewhere is kept, on one line.
	back = refusal(http.StatusNotImplemented, "text/plain", http.Header{}, []byte("Unsupported method ('POST')\nTry again\n"))
	if msg := back.Error(); !strings.HasSuffix(msg, "HTTP 501: Unsupported method ('POST') Try again") {
		t.Fatalf("plain text reads as %q", msg)
	}
}
