package api

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/client"
	"github.com/ultimat3/jobs/mcp"
)

// MCPPath is where the server answers the Model Context Protocol (streamable HTTP).
const MCPPath = "/mcp"

// mcpHandler serves the operator's tools (package mcp) over streamable HTTP, behind the API's
// credentials: authenticate has checked the bearer token (a tenant-scoped one is refused, as
// on every route spanning tenants; a worker's may not read), and each request is served by the
// server its credential's role allows: the read tools for a viewer, every tool for an operator
// or admin.
//
// The handler is stateless (every POST is a whole exchange, no MCP session is kept): a
// session would be bound to the credential that opened it, and any later request presenting
// its id would be served with that credential's tools. Stateless, each request carries and is
// judged by its own token.
func (s *Server) mcpHandler() http.Handler {
	local := client.Local(s.eng, s.cfg.Scheduler)
	read := mcp.NewServer(local, mcp.Options{Access: mcp.ReadOnly, Logger: s.log})
	all := mcp.NewServer(local, mcp.Options{Access: mcp.ReadWrite, Logger: s.log})
	return s.mcpOneMessage(s.mcpRefusals(sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		if credentialOf(r).Role.can(capAct) {
			return all
		}
		return read
	}, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: s.log,
		// The SDK's own guard against DNS rebinding refuses, on a loopback listener, every
		// Host that is not loopback, token or not: /mcp would be unreachable by name (a
		// reverse proxy keeping the Host header) exactly where the rest of the API is served.
		// authenticate already applies the API's rule to /mcp as to every route: only an
		// engine without a token is held to requests by address, and a token is not
		// something a rebinding page can send.
		DisableLocalhostProtection: true,
	})))
}

// mcpOneMessage serves one JSON-RPC message a request: a POST whose body is a JSON array (a
// batch) is refused with 400 X_BAD_REQUEST before the SDK reads it, so no call in it runs.
//
// The SDK serves a batch sent without an MCP-Protocol-Version header, or with a version before
// 2025-06-18 (which dropped batching), by running every call in it at once and holding every
// answer for one reply. One body of MaxBody bytes was then some 20,000 tool calls, as many
// store queries in flight, and an answer of tens of megabytes built in memory (a page of 500
// runs each: gigabytes), on a viewer's token; and a batch repeating an id answered one of
// its calls and dropped the other without a word. One message a request holds a POST to the cost of one tool
// call, as a GET on /v1 is one query. The SDK's client sends one message a request.
func (s *Server) mcpOneMessage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		// JSON's leading whitespace is skipped (read and dropped: the body means the same
		// without it); the first other byte is put back for the SDK. A read error (a body over
		// MaxBody) is left for the SDK to meet and refuse as before.
		body := bufio.NewReader(r.Body)
		for {
			b, err := body.ReadByte()
			if err != nil {
				break
			}
			if b == ' ' || b == '\t' || b == '\n' || b == '\r' {
				continue
			}
			_ = body.UnreadByte()
			if b == '[' {
				s.writeError(w, r, jobs.Errorf(jobs.CodeBadRequest, "mcp: a JSON-RPC batch is not served: send one message a request"))
				return
			}
			break
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{body, r.Body}
		next.ServeHTTP(w, r)
	})
}

// mcpRefusals answers the SDK transport's own refusals as the API answers every refusal, with
// an X_ code in the API's error shape (writeError), rather than the plain text of http.Error
// they are written in: a GET or DELETE (a stateless handler serves POST only: no SSE stream to
// open, no session to end) is 405 X_METHOD_NOT_ALLOWED with the transport's Allow, a body that
// is not JSON-RPC or lacks the headers the transport needs is 400 X_BAD_REQUEST, a body over
// MaxBody 413 X_PAYLOAD_TOO_LARGE. Only a plain-text error status is rewritten: a JSON-RPC
// answer (a result, or an error the protocol itself defines) goes out as the SDK wrote it, and
// an SDK client reads the status of a rewritten one as before (it takes a 405 to a GET as "no
// stream here").
func (s *Server) mcpRefusals(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &mcpWriter{ResponseWriter: w}
		next.ServeHTTP(rw, r)
		if rw.held == 0 {
			return
		}
		msg := strings.TrimSpace(rw.text.String())
		var e *jobs.Error
		switch status := rw.held; {
		case status == http.StatusMethodNotAllowed:
			e = jobs.Errorf(jobs.CodeMethodNotAllowed, "%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, w.Header().Get("Allow"))
		case status == http.StatusRequestEntityTooLarge:
			e = jobs.Errorf(jobs.CodePayloadTooLarge, "mcp: %s", msg)
		case status == http.StatusForbidden:
			e = jobs.Errorf(jobs.CodeForbidden, "mcp: %s", msg)
		case status >= 500:
			s.log.Error("jobs.mcp.transport", "method", r.Method, "status", status, "err", msg)
			e = jobs.Errorf(jobs.CodeInternal, "internal error; the engine logged it")
		default:
			e = jobs.Errorf(jobs.CodeBadRequest, "mcp: %s", msg)
		}
		s.writeError(w, r, e)
	})
}

// mcpWriter holds back a plain-text error answer (http.Error's: text/plain, 4xx or 5xx) for
// mcpRefusals to rewrite; every other answer passes through as it is written.
type mcpWriter struct {
	http.ResponseWriter
	held   int  // the status of the answer held back; 0 when none is
	passed bool // the header went out unchanged
	text   bytes.Buffer
}

func (w *mcpWriter) WriteHeader(status int) {
	switch {
	case w.passed:
		w.ResponseWriter.WriteHeader(status) // net/http logs the superfluous call, as before
	case w.held != 0:
	case status >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain"):
		w.held = status
	default:
		w.passed = true
		w.ResponseWriter.WriteHeader(status)
	}
}

func (w *mcpWriter) Write(b []byte) (int, error) {
	if !w.passed && w.held == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.held != 0 {
		// http.Error's one line; bounded all the same, it is echoed in the refusal.
		if room := 1024 - w.text.Len(); room > 0 {
			w.text.Write(b[:min(len(b), room)])
		}
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Flush sends what was written so far, unless it is a refusal held back.
func (w *mcpWriter) Flush() {
	if w.held != 0 {
		return
	}
	if !w.passed {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (w *mcpWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
