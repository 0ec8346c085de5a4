package api

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
)

// An answer that is not the engine's (another server at the address: a web page, an empty body,
// text, JSON without an engine error) says the client's wiring is wrong, never that the request
// is: on a 404 or 405 it is X_ROUTE_NOT_FOUND or X_METHOD_NOT_ALLOWED, on a success
// X_ENGINE_UNREACHABLE. X_BAD_REQUEST or X_ENCODING would be the terminal refusal of the request
// itself, which an outbox relay sets its row aside for: a relay at a wrong address would empty
// the outbox into the failed list.
func TestAnswerNotFromTheEngineNamesTheWiring(t *testing.T) {
	t.Parallel()
	page := "<!DOCTYPE html><html><body><h1>Not Found</h1></body></html>"
	for _, c := range []struct {
		name        string
		status      int
		contentType string
		body        string
		want        jobs.Code
	}{
		{"404 page", http.StatusNotFound, "text/html; charset=utf-8", page, jobs.CodeRouteNotFound},
		{"404 empty", http.StatusNotFound, "", "", jobs.CodeRouteNotFound},
		{"404 text", http.StatusNotFound, "text/plain; charset=utf-8", "404 page not found\n", jobs.CodeRouteNotFound},
		{"404 JSON of another server", http.StatusNotFound, ContentJSON, `{"message":"Not Found"}`, jobs.CodeRouteNotFound},
		{"405 page", http.StatusMethodNotAllowed, "text/html", page, jobs.CodeMethodNotAllowed},
		{"405 empty", http.StatusMethodNotAllowed, "", "", jobs.CodeMethodNotAllowed},
		{"200 page", http.StatusOK, "text/html", page, jobs.CodeEngineUnreachable},
		{"200 empty", http.StatusOK, "", "", jobs.CodeEngineUnreachable},
		{"200 text", http.StatusOK, "text/plain", "ok", jobs.CodeEngineUnreachable},
		{"204", http.StatusNoContent, "", "", jobs.CodeEngineUnreachable},
	} {
		resp, err := answer(c.status, http.Header{"Content-Type": {c.contentType}}, []byte(c.body))
		if err == nil {
			var out jobs.EnqueueResult
			err = decodeAs(resp, &out)
		}
		if jobs.CodeOf(err) != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
		// A page or an empty answer is not printed; the error says what it is.
		if msg := fmt.Sprint(err); (c.body == page || c.body == "") && (strings.Contains(msg, "<") || !strings.Contains(msg, "does not answer as a jobs engine")) {
			t.Errorf("%s reads as %q", c.name, msg)
		}
	}

	// The engine's own refusals keep their codes, in either codec, whatever their status.
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, code := range []jobs.Code{jobs.CodeRunNotFound, jobs.CodeJobUndeclared, jobs.CodeRouteNotFound,
		jobs.CodeMethodNotAllowed, jobs.CodeBadRequest, jobs.CodeEncoding, jobs.CodeStoreUnavailable} {
		for _, req := range []*http.Request{
			httptest.NewRequest(http.MethodGet, "/v1/runs/r1", nil),                // JSON
			httptest.NewRequest(http.MethodPost, "/v1/worker/record", http.NoBody), // msgpack
		} {
			rec := httptest.NewRecorder()
			s.writeError(rec, req, jobs.Errorf(code, "refused"))
			_, err := answer(rec.Code, rec.Header(), rec.Body.Bytes())
			if jobs.CodeOf(err) != code {
				t.Errorf("the engine's %s to %s reads as %v", code, req.URL.Path, err)
			}
		}
	}

	// A success in the engine's types that does not decode is still X_ENCODING.
	for _, ct := range []string{ContentJSON, ContentMsgpack} {
		var out jobs.EnqueueResult
		if err := decodeAs(response{contentType: ct, body: []byte{0xc1}}, &out); jobs.CodeOf(err) != jobs.CodeEncoding {
			t.Errorf("a garbled %s success: %v, want X_ENCODING", ct, err)
		}
	}
}
