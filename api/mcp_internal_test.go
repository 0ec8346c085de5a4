package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
)

// mcpRefusals rewrites only the transport's plain-text errors: a JSON-RPC answer, success or
// error, and a streamed answer go out as the handler wrote them; a plain-text 5xx becomes a
// logged X_INTERNAL that does not echo the handler's text.
func TestMCPRefusalsRewriteOnlyPlainText(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	s := &Server{log: slog.New(slog.NewTextHandler(&logs, nil))}
	serve := func(h http.HandlerFunc) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		s.mcpRefusals(h).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, MCPPath, strings.NewReader("{}")))
		return rec
	}
	rpcErr := `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`
	rec := serve(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(rpcErr))
	})
	if rec.Code != http.StatusNotFound || rec.Body.String() != rpcErr {
		t.Errorf("a JSON-RPC error: %d %s; want it untouched", rec.Code, rec.Body)
	}
	rec = serve(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: 1\n\n"))
		http.NewResponseController(w).Flush()
		_, _ = w.Write([]byte("data: 2\n\n"))
	})
	if rec.Code != http.StatusOK || !rec.Flushed || rec.Body.String() != "data: 1\n\ndata: 2\n\n" {
		t.Errorf("a stream: %d flushed %v %q; want it untouched", rec.Code, rec.Flushed, rec.Body)
	}
	rec = serve(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "failed connection", http.StatusInternalServerError)
	})
	var eb ErrorBody
	if rec.Code != http.StatusInternalServerError || json.Unmarshal(rec.Body.Bytes(), &eb) != nil || eb.Error.Code != jobs.CodeInternal ||
		strings.Contains(rec.Body.String(), "failed connection") || !strings.Contains(logs.String(), "failed connection") {
		t.Errorf("a plain-text 500: %d %s (log %s); want a logged X_INTERNAL", rec.Code, rec.Body, logs.String())
	}
	rec = serve(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "request body exceeds 10 bytes", http.StatusRequestEntityTooLarge)
	})
	if rec.Code != http.StatusRequestEntityTooLarge || json.Unmarshal(rec.Body.Bytes(), &eb) != nil || eb.Error.Code != jobs.CodePayloadTooLarge {
		t.Errorf("a plain-text 413: %d %s; want X_PAYLOAD_TOO_LARGE", rec.Code, rec.Body)
	}
}
