package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/client"
	"github.com/ultimat3/jobs/internal/testenv"
)

// bearer adds a token to every request of the SDK's HTTP client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

// serveAPI starts a real api.Server over the fixture's engine with one credential per role.
func serveAPI(t *testing.T, o *testenv.Ops) string {
	t.Helper()
	srv, err := api.NewServer(api.Config{Engine: o.Engine, Scheduler: sched(t, o), Logger: o.Logger, Addr: "127.0.0.1:0", NoUI: true,
		Credentials: []api.Credential{
			{Token: "admin-t", Role: api.RoleAdmin},
			{Token: "operator-t", Role: api.RoleOperator},
			{Token: "viewer-t", Role: api.RoleViewer},
			{Token: "worker-t", Role: api.RoleWorker},
			{Token: "tenant-t", Role: api.RoleOperator, Tenant: "acme"},
		}})
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
	return "http://" + srv.Addr()
}

func connectHTTP(ctx context.Context, base, token string) (*sdk.ClientSession, error) {
	tr := &sdk.StreamableClientTransport{Endpoint: base + api.MCPPath, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}
	return sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, tr, nil)
}

// TestStreamableHTTPRoles serves the tools at /mcp of a real server: an admin is served every
// tool (and they work), a viewer the read tools only (an action is X_FORBIDDEN and changes
// nothing); no token, a wrong one, a worker's and a tenant-scoped one are refused at connect.
func TestStreamableHTTPRoles(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			o := testenv.StartOps(t, b.Open(t))
			base := serveAPI(t, o)
			c := client.Local(o.Engine, nil)

			viewer, err := connectHTTP(ctx, base, "viewer-t")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = viewer.Close() })
			checkViewer(t, o, c, viewer)

			for token, want := range map[string]string{"": "401", "nope": "401", "worker-t": "403", "tenant-t": "403"} {
				cs, err := connectHTTP(ctx, base, token)
				if err == nil {
					_ = cs.Close()
					t.Fatalf("token %q: connected to /mcp", token)
				}
				if !strings.Contains(err.Error(), want) && !strings.Contains(strings.ToLower(err.Error()), map[string]string{"401": "unauthorized", "403": "forbidden"}[want]) {
					t.Fatalf("token %q: %v, want %s", token, err, want)
				}
			}

			admin, err := connectHTTP(ctx, base, "admin-t")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = admin.Close() })
			exerciseTools(t, o, c, admin)
		})
	}
}

// TestStreamableHTTPOperator: an operator's token is served the actions too.
func TestStreamableHTTPOperator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := testenv.StartOps(t, testenv.Backends()[0].Open(t))
	base := serveAPI(t, o)
	cs, err := connectHTTP(ctx, base, "operator-t")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got := toolNames(t, cs); len(got) != len(readTools)+len(actionTools) {
		t.Fatalf("an operator's tools: %v", got)
	}
	var sum struct{ State string }
	ok(t, call(t, cs, "cancel_run", map[string]any{"run_id": o.Suspended, "reason": "operator"}), &sum)
	if sum.State != "cancelled" {
		t.Fatalf("cancel_run by an operator: %+v", sum)
	}
}

// TestStreamableHTTPRefusals: the transport's own refusals at /mcp are answered in the API's
// error shape with an X_ code, not in the SDK's plain text: GET and DELETE (the stateless
// handler serves POST only) are 405 X_METHOD_NOT_ALLOWED with Allow, a body that is not
// JSON-RPC or a request without the Accept the transport needs is 400 X_BAD_REQUEST. A
// well-formed exchange is answered as before, and an SDK client still connects (the tests
// above).
func TestStreamableHTTPRefusals(t *testing.T) {
	t.Parallel()
	o := testenv.StartOps(t, testenv.Backends()[0].Open(t))
	base := serveAPI(t, o)
	const accept = "application/json, text/event-stream"
	send := func(method, body, accept string) (int, http.Header, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, base+api.MCPPath, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer viewer-t")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		out, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, res.Header, out
	}
	for _, c := range []struct {
		what, method, body, accept string
		status                     int
		code                       jobs.Code
		allow                      string
	}{
		{"GET (no SSE stream)", http.MethodGet, "", "text/event-stream", 405, jobs.CodeMethodNotAllowed, "POST"},
		{"DELETE (no session)", http.MethodDelete, "", "", 405, jobs.CodeMethodNotAllowed, "POST"},
		{"PUT", http.MethodPut, "{}", accept, 405, jobs.CodeMethodNotAllowed, "POST"},
		{"malformed JSON", http.MethodPost, `{"jsonrpc":"2.0",`, accept, 400, jobs.CodeBadRequest, ""},
		{"not JSON-RPC", http.MethodPost, `[1]`, accept, 400, jobs.CodeBadRequest, ""},
		{"an unknown method", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"no/such"}`, accept, 400, jobs.CodeBadRequest, ""},
		{"without Accept", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "", 400, jobs.CodeBadRequest, ""},
	} {
		st, h, out := send(c.method, c.body, c.accept)
		var eb api.ErrorBody
		if st != c.status || json.Unmarshal(out, &eb) != nil || eb.Error == nil || eb.Error.Code != c.code || eb.Error.Message == "" {
			t.Errorf("%s: %d %s; want %d with %s", c.what, st, out, c.status, c.code)
		}
		if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: Content-Type %q", c.what, ct)
		}
		if got := h.Get("Allow"); got != c.allow {
			t.Errorf("%s: Allow %q, want %q", c.what, got, c.allow)
		}
	}
	// A whole exchange in one POST is answered by the SDK, untouched.
	st, _, out := send(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, accept)
	if st != http.StatusOK || !strings.Contains(string(out), `"list_runs"`) {
		t.Fatalf("tools/list: %d %.300s", st, out)
	}
}
