package api_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
)

// /mcp is held to the same Host rule as every other route, which authenticate applies: an
// engine with a token answers by any host name (behind a reverse proxy that keeps the Host
// header, say), and one without a token by address only, against DNS rebinding. The SDK's own
// localhost guard, which refuses every non-loopback Host on a loopback listener whatever the
// token, must not make /mcp answer otherwise than GET /v1/queues does.
func TestMCPFollowsTheAPIsHostRule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		token string
	}{{"with a token", "admin-t"}, {"without a token", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, api.Config{Token: tc.token})
			u, err := url.Parse(b.url)
			if err != nil {
				t.Fatal(err)
			}
			send := func(host, method, path, body string) (int, string) {
				t.Helper()
				req, err := http.NewRequest(method, b.url+path, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Host = host
				if tc.token != "" {
					req.Header.Set("Authorization", "Bearer "+tc.token)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				out, _ := io.ReadAll(res.Body)
				return res.StatusCode, string(out)
			}
			for _, h := range []struct {
				host      string
				byAddress bool
			}{
				{"jobs.example.com", false},
				{"jobs.example.com:" + u.Port(), false},
				{"localhost.example.com", false},
				{"localhost:" + u.Port(), true},
				{u.Host, true},
				{"[::1]:" + u.Port(), true},
				{"192.0.2.7", true}, // an address, if not this machine's: no rebinding page sends it
			} {
				want := http.StatusOK
				if tc.token == "" && !h.byAddress {
					want = http.StatusUnauthorized
				}
				if st, out := send(h.host, http.MethodGet, "/v1/queues", ""); st != want {
					t.Fatalf("GET /v1/queues, Host %s: %d %s; want %d", h.host, st, out, want)
				}
				st, out := send(h.host, http.MethodPost, api.MCPPath, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
				if st != want {
					t.Fatalf("POST /mcp, Host %s: %d %s; want %d, as GET /v1/queues answers", h.host, st, out, want)
				}
				if want == http.StatusOK && !strings.Contains(out, `"list_runs"`) {
					t.Fatalf("POST /mcp, Host %s: %s; want the tools", h.host, out)
				}
				if want != http.StatusOK {
					if code := jsonCode(t, []byte(out)); code != jobs.CodeUnauthorized {
						t.Fatalf("POST /mcp, Host %s: %s; want X_UNAUTHORIZED", h.host, code)
					}
				}
			}
		})
	}
}
