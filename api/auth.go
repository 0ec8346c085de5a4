package api

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/ultimat3/jobs"
)

// Role is what a credential may do.
type Role string

const (
	// RoleWorker may use the worker protocol (/v1/worker/…: poll, record, heartbeat, history,
	// manifest) and nothing else.
	RoleWorker Role = "worker"
	// RoleOperator may read everything a viewer reads and act: enqueue, publish, cancel, retry.
	RoleOperator Role = "operator"
	// RoleViewer may read: runs, histories, queues, dead letters, the manifest, codes, metrics.
	RoleViewer Role = "viewer"
	// RoleAdmin may do everything; Config.Token is an admin credential.
	RoleAdmin Role = "admin"
)

// Credential names the role with its article, for messages: "an admin credential", "a viewer
// credential".
func (r Role) Credential() string {
	if r != "" && strings.ContainsRune("aeiou", rune(r[0])) {
		return "an " + string(r) + " credential"
	}
	return "a " + string(r) + " credential"
}

// Credential is one bearer token with its role and, optionally, the tenant it is scoped to. A
// tenant-scoped credential (operator or viewer) sees and acts on that tenant's runs only: other
// tenants' runs are not found, a listing is filtered to the tenant, an enqueue must name it, and
// the fleet-wide surfaces (queues, metrics, the manifest, publishing an event any tenant's run
// may wait for) are refused.
type Credential struct {
	Token  string
	Role   Role
	Tenant string
}

// ParseCredential reads "role=token" or "role@tenant=token", the form of --credential.
func ParseCredential(s string) (Credential, error) {
	head, token, ok := strings.Cut(s, "=")
	if !ok || token == "" {
		return Credential{}, jobs.Errorf(jobs.CodeBadRequest, "credential %q: want role=token or role@tenant=token", redact(s))
	}
	role, tenant, _ := strings.Cut(head, "@")
	c := Credential{Token: token, Role: Role(role), Tenant: tenant}
	return c, c.validate()
}

func redact(s string) string {
	if head, _, ok := strings.Cut(s, "="); ok {
		return head + "=…"
	}
	return "…"
}

func (c Credential) validate() error {
	switch c.Role {
	case RoleWorker, RoleAdmin:
		if c.Tenant != "" {
			return jobs.Errorf(jobs.CodeBadRequest, "%s cannot be scoped to a tenant: workers and admins serve the whole fleet", c.Role.Credential())
		}
	case RoleOperator, RoleViewer:
	default:
		return jobs.Errorf(jobs.CodeBadRequest, "credential role %q: want worker, operator, viewer or admin", c.Role)
	}
	if c.Token == "" {
		return jobs.Errorf(jobs.CodeBadRequest, "%s has an empty token", c.Role.Credential())
	}
	if p := tokenProblem(c.Token); p != "" {
		return jobs.Errorf(jobs.CodeBadRequest, "%s has a token that %s", c.Role.Credential(), p)
	}
	return jobs.ValidIdentifier("tenant", c.Tenant)
}

// CheckToken refuses a bearer token that is not printable ASCII without spaces (RFC 6750's tokens
// are a subset of it). The usual case is the newline a secret file ends with, read whole into
// $JOBS_TOKEN: a client cannot send it (the header would break), and a server given it would
// match no request, as an Authorization header's value arrives trimmed. Empty, meaning no token,
// passes. NewClient and NewServer apply it; the message never shows the token.
func CheckToken(token string) error {
	if p := tokenProblem(token); p != "" {
		return jobs.Errorf(jobs.CodeBadRequest, "the token %s", p)
	}
	return nil
}

// tokenProblem says what is wrong with a token for CheckToken, or "".
func tokenProblem(token string) string {
	for i := 0; i < len(token); i++ {
		b := token[i]
		if b > ' ' && b < 0x7f {
			continue
		}
		what, hint := "a control character", ""
		switch {
		case b == ' ':
			what = "a space"
		case b > 0x7f:
			what = "a byte outside printable ASCII"
		case b == '\n' || b == '\r':
			hint = " (a secret file's trailing newline?)"
		}
		return fmt.Sprintf("holds %s (0x%02x, byte %d of %d): a bearer token is printable ASCII without spaces%s", what, b, i+1, len(token), hint)
	}
	return ""
}

// capability is what a request needs.
type capability int

const (
	capRead capability = iota
	capAct
	capWork
)

func (c capability) String() string {
	return [...]string{"read", "act (enqueue, publish, cancel, retry)", "use the worker protocol"}[c]
}

func (r Role) can(c capability) bool {
	switch r {
	case RoleAdmin:
		return true
	case RoleOperator:
		return c == capRead || c == capAct
	case RoleViewer:
		return c == capRead
	case RoleWorker:
		return c == capWork
	}
	return false
}

// needs classifies a request: the worker protocol, a read (GET), or an action.
func needs(r *http.Request) capability {
	switch {
	case strings.HasPrefix(r.URL.Path, "/v1/worker/"):
		return capWork
	case r.URL.Path == MCPPath:
		// Every MCP exchange is a POST: reading is enough to be served; the actions are
		// checked per tool (api/mcp.go).
		return capRead
	case isRead(r):
		return capRead
	}
	return capAct
}

// isRead reports whether r only reads: a GET, or a HEAD, which the router serves with the GET's
// handler (net/http's ServeMux matches "GET /path" for both). Every rule of authorize that tells
// a read apart asks here, so that a HEAD is held to the GET's rule: a HEAD of a listing is built
// in full, and its Content-Length says how large the answer to the GET would be.
func isRead(r *http.Request) bool {
	return r.Method == http.MethodGet || r.Method == http.MethodHead
}

type credKey struct{}

// credentialOf returns the credential a request was authenticated with; without tokens
// configured, an admin one (the engine then serves loopback only).
func credentialOf(r *http.Request) Credential {
	if c, ok := r.Context().Value(credKey{}).(Credential); ok {
		return c
	}
	return Credential{Role: RoleAdmin}
}

// CheckCredentials checks cfg's Token and Credentials as NewServer does: each credential valid
// (its role, tenant and token) and no token given two roles. A command line checks them before
// it opens anything, so that a mistake in them is a usage error with nothing created.
func (cfg Config) CheckCredentials() error {
	_, err := credentials(cfg)
	return err
}

// credentials indexes the configured credentials by the digest of their token: a lookup by
// digest says nothing, by its timing, about the tokens it did not match.
func credentials(cfg Config) (map[[sha256.Size]byte]Credential, error) {
	out := map[[sha256.Size]byte]Credential{}
	all := cfg.Credentials
	if cfg.Token != "" {
		all = append([]Credential{{Token: cfg.Token, Role: RoleAdmin}}, all...)
	}
	for _, c := range all {
		if err := c.validate(); err != nil {
			return nil, err
		}
		k := sha256.Sum256([]byte(c.Token))
		if prev, dup := out[k]; dup && prev != c {
			return nil, jobs.Errorf(jobs.CodeBadRequest, "one token is given two roles (%s and %s)", prev.Role, c.Role)
		}
		out[k] = c
	}
	return out, nil
}

// authorize checks a request against its credential's role and tenant. It runs after the token
// was matched, so a refusal here is X_FORBIDDEN (403), not X_UNAUTHORIZED.
func (s *Server) authorize(r *http.Request, c Credential) (*http.Request, error) {
	if r.URL.Path == "/v1/whoami" && isRead(r) {
		// Any valid credential may ask who it is, whatever its role or tenant: the answer is
		// its own role and tenant, which its holder may know (engine mcp asks, then refuses a
		// worker's or a tenant's token itself, with a reason).
		return r, nil
	}
	need := needs(r)
	if !c.Role.can(need) {
		return r, jobs.Errorf(jobs.CodeForbidden, "%s may not %s", c.Role.Credential(), need)
	}
	if c.Tenant == "" {
		return r, nil
	}
	p := r.URL.Path
	switch {
	case p == "/v1/runs" || p == "/v1/dead-letters":
		if isRead(r) {
			// The listing is the tenant's, whatever the query asks.
			q := r.URL.Query()
			if t := q.Get("tenant"); t != "" && t != c.Tenant {
				return r, jobs.Errorf(jobs.CodeForbidden, "this credential is scoped to tenant %q", c.Tenant)
			}
			q.Set("tenant", c.Tenant)
			r2 := r.Clone(r.Context())
			r2.URL.RawQuery = q.Encode()
			return r2, nil
		}
		return r, nil // an enqueue: checked against the request's tenant (checkEnqueueScope)
	case p == "/v1/runs/bulk" && r.Method == http.MethodPost:
		return r, nil // a bulk enqueue: each item is checked against the tenant (enqueueMany)
	case strings.HasPrefix(p, "/v1/runs/"):
		// The id the router will serve (r.PathValue("id") in the handler), not one read from the
		// path here: r.URL.Path is already unescaped, and unescaping its segment again checked
		// another id than the handler was served ("%252F"), or none at all ("%25zz").
		if id, ok := routedRunID(r); ok && id != "" {
			run, err := s.eng.GetRun(r.Context(), id)
			if jobs.HasCode(err, jobs.CodeRunNotFound) || (err == nil && run.Tenant != c.Tenant) {
				// Not found rather than forbidden, in one text whether the run is another
				// tenant's or none at all: another tenant's run ids are not confirmed.
				return r, runNotFound(id)
			}
			if err != nil {
				return r, err
			}
		}
		// No id: the router serves no run for this path either (it redirects an unclean
		// path, and answers 404 or 405 for one no route matches).
		return r, nil
	case p == "/v1/codes":
		return r, nil
	}
	return r, jobs.Errorf(jobs.CodeForbidden, "a credential scoped to tenant %q may not use %s, which spans every tenant", c.Tenant, p)
}

// runNotFound is the answer to a tenant-scoped credential for a run it may not see: another
// tenant's, or one that does not exist. The stores word their own not-found differently (SQLite
// `run "<id>" not found`, memory and Postgres `run <id>`), so passing theirs on beside this one
// told the two cases apart on SQLite; authorize answers both with this text.
func runNotFound(id string) error {
	return jobs.Errorf(jobs.CodeRunNotFound, "run %q not found", id)
}

// runRoutes matches the paths that name a run as the server's router matches its run routes
// ("/v1/runs/{id}", "/v1/runs/{id}/history", …), so that routedRunID reads the id those
// routes' handlers are served. The router matches on the escaped path, splits it on '/', and
// unescapes each segment once; so does this, being a ServeMux too.
var runRoutes = func() *http.ServeMux {
	m := http.NewServeMux()
	read := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := w.(*routedID); ok {
			c.id, c.ok = r.PathValue("id"), true
		}
	})
	m.Handle("/v1/runs/{id}", read)
	m.Handle("/v1/runs/{id}/{rest...}", read)
	return m
}()

// routedID is the ResponseWriter routedRunID hands runRoutes: it keeps the id, and discards
// whatever the mux writes (a redirect of an unclean path, a 404).
type routedID struct {
	id string
	ok bool
	h  http.Header
}

func (c *routedID) Header() http.Header {
	if c.h == nil {
		c.h = http.Header{}
	}
	return c.h
}
func (*routedID) Write(b []byte) (int, error) { return len(b), nil }
func (*routedID) WriteHeader(int)             {}

// routedRunID returns the run id the router extracts from r's path (r.PathValue("id") of the
// route it will serve), and false when r's path names no run the router would serve.
func routedRunID(r *http.Request) (string, bool) {
	var c routedID
	// On a copy: the mux records its match (pattern, wildcards) in the request it serves.
	runRoutes.ServeHTTP(&c, r.WithContext(r.Context()))
	return c.id, c.ok
}

// checkEnqueueScope refuses an enqueue for another tenant (or none) by a tenant-scoped credential.
func checkEnqueueScope(r *http.Request, tenant string, noTenant bool) error {
	c := credentialOf(r)
	if c.Tenant != "" && (noTenant || tenant != c.Tenant) {
		return jobs.Errorf(jobs.CodeForbidden, "this credential is scoped to tenant %q and may not enqueue for %q", c.Tenant, tenant)
	}
	return nil
}

// loopbackRemote reports whether a request came from this machine.
func loopbackRemote(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LoopbackAddr reports whether a listen address is loopback only (the engine serves without
// tokens only there).
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func withCredential(r *http.Request, c Credential) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), credKey{}, c))
}

// uiLogin is the console's view of the credentials: an admin's or operator's token may look and
// act, a viewer's may look. A worker's token, and a tenant-scoped one, may not log in: the
// console shows every tenant's runs.
//
// The secret keys the console's session cookies. It is derived from every credential as it is
// now: its token's digest, its role and its tenant. A session cookie carries the role its token
// had at login (ui.newSession), so any change to a credential (a token rotated or removed, an
// operator demoted to viewer, a token scoped to a tenant, which may not use the console at all)
// must end the sessions opened under the old one; changing the secret ends every browser
// session, the first time the engine serves with the new credentials.
func (s *Server) uiLogin() (login func(string) (ok, act bool), secret string) {
	return s.uiLoginFn(), uiSecret(s.creds)
}

// uiSecret is the console's session secret for creds (see uiLogin): one entry per credential,
// its digest (fixed length) then its role and tenant each ended by a NUL (neither may hold one),
// sorted, so that the map's order does not matter and no two credential sets give one secret.
func uiSecret(creds map[[sha256.Size]byte]Credential) string {
	entries := make([]string, 0, len(creds))
	for d, c := range creds {
		entries = append(entries, string(d[:])+string(c.Role)+"\x00"+c.Tenant+"\x00")
	}
	slices.Sort(entries)
	return strings.Join(entries, "")
}

// uiLoginFn answers whether a token may use the console (ok) and act there: it looks the token
// up among the credentials as they are now, on every bearer request and login.
func (s *Server) uiLoginFn() func(string) (ok, act bool) {
	return func(token string) (bool, bool) {
		if token == "" {
			return false, false
		}
		c, found := s.creds[sha256.Sum256([]byte(token))]
		if !found || c.Tenant != "" || !c.Role.can(capRead) {
			return false, false
		}
		return true, c.Role.can(capAct)
	}
}
