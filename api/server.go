// Package api is the engine's HTTP face and its Go client.
//
// The server (NewServer) has three parts behind bearer tokens with roles (worker, operator,
// viewer, admin; optionally scoped to a tenant, see Credential):
//
//   - the worker protocol, msgpack bodies (Content-Type application/msgpack) carrying the
//     frontend types: POST /v1/worker/poll (a long-poll), /v1/worker/record,
//     /v1/worker/heartbeat, /v1/worker/history and /v1/worker/manifest;
//   - the admin API, JSON: enqueue, publish, cancel, retry, inspect runs, queues, dead letters,
//     the fleet's manifest and the code registry, under /v1/;
//   - /metrics (Prometheus), /healthz (the process is up) and /readyz (the store answers).
//   - /mcp, the operator's tools over the Model Context Protocol (package mcp, api/mcp.go), and
//     GET /v1/runs/{id}/result, a long-poll for a run's outcome (api/result.go).
//
// Every refusal carries a stable X_ code: {"error":{"code","message"}} in JSON, {code, message}
// in msgpack, with the HTTP status of StatusOf. The client (NewClient) turns them back into
// *jobs.Error, so jobs.HasCode answers the same whether the engine is in-process or remote, and a
// worker runs unchanged over either: Client implements frontend.Frontend.
package api

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api/ui"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/promreg"
	"github.com/ultimat3/jobs/internal/refuse"
	"github.com/ultimat3/jobs/scheduler"
)

// DefaultAddr is where the server listens unless told otherwise: loopback, so an engine started
// without a second thought is not reachable from the network.
const DefaultAddr = "127.0.0.1:7233"

// serverIdleTimeout is how long a kept-alive connection, plain or upgraded (frames.go), may wait
// for its next request.
const serverIdleTimeout = 2 * time.Minute

// Config configures a Server.
type Config struct {
	// Engine serves every request. Required.
	Engine *engine.Engine
	// Scheduler serves the /v1/schedules routes. Optional: without one they answer
	// X_NO_SCHEDULER.
	Scheduler *scheduler.Scheduler
	// Addr is the address Start listens on. Defaults to DefaultAddr (127.0.0.1:7233).
	Addr string
	// Credentials are bearer tokens with a role (worker, operator, viewer, admin) and optionally
	// a tenant (see Credential). With neither Token nor Credentials, the server answers loopback
	// clients only, and Start refuses a non-loopback address unless AllowUnauthenticated.
	Credentials []Credential
	// AllowUnauthenticated lets a server without credentials listen on (and answer) addresses
	// beyond loopback. Defaults to false.
	AllowUnauthenticated bool
	// Token, when set, must be presented as "Authorization: Bearer <token>" on every request but
	// /healthz and /readyz. Defaults to "": no authentication, which is only safe on loopback.
	Token string
	// MaxBody bounds a request body; a larger one is refused with X_PAYLOAD_TOO_LARGE (413).
	// Defaults to 2 MiB: above the engine's 1 MiB payload limit, so the engine's own check
	// gives the precise message for a payload that is merely too large.
	MaxBody int64
	// MaxPollWait caps a worker's long-poll, whatever PollRequest.Wait asks. Defaults to 30s:
	// under the idle timeouts of common proxies and load balancers.
	MaxPollWait time.Duration
	// MaxPollBytes bounds one poll's answer; the tasks past it are handed back at once, without
	// spending an attempt (the first task is always sent). Defaults to 8 MiB.
	MaxPollBytes int
	// BodyTimeout bounds how long a request body may take to arrive. Defaults to 10s.
	BodyTimeout time.Duration
	// MaxConns caps the connections served at once (Start); more wait to be accepted. With
	// credentials, a connection that has not yet carried an authenticated request gives its
	// slot to a newcomer when every slot is taken, and is closed after a few seconds idle
	// (limits.go). Defaults to 1024.
	MaxConns int
	// ReadyTimeout bounds the store probe of /readyz. Defaults to 2s.
	ReadyTimeout time.Duration
	// Registerer receives the queue collector (queue_depth, queue_oldest_ready_seconds,
	// queue_dead_jobs). Defaults to a new registry holding the Go and process collectors too.
	Registerer prometheus.Registerer
	// Gatherer is what /metrics serves. Defaults to Registerer when it is also a Gatherer (a
	// *prometheus.Registry is), else to prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Logger receives request failures and panics. Defaults to slog.Default().
	Logger *slog.Logger
	// NoUI turns off the operator console served under /_x/ (package api/ui).
	NoUI bool
}

// Server is the engine's HTTP handler, with a listener lifecycle for when it serves on its own
// (Start, Stop; the fx Module calls them).
type Server struct {
	cfg     Config
	eng     *engine.Engine
	log     *slog.Logger
	handler http.Handler
	// creds are the credentials by the digest of their token (auth.go); empty: no tokens.
	creds map[[sha256.Size]byte]Credential
	ui    http.Handler // nil with Config.NoUI

	// drainCtx ends when Stop begins: long-polls return at once, /readyz answers 503.
	drainCtx context.Context
	drain    context.CancelFunc
	// framing counts the upgraded connections being served (frames.go): net/http's Shutdown
	// does not wait for a hijacked connection, Stop does.
	framing sync.WaitGroup

	mu   sync.Mutex
	http *http.Server
	ln   net.Listener
	done chan struct{}
}

// NewServer returns the API handler over cfg.Engine.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Engine == nil {
		return nil, jobs.Errorf(jobs.CodeInvariant, "api: Config.Engine is required")
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 2 << 20
	}
	if cfg.MaxBody < 0 {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "api: MaxBody is negative (%d)", cfg.MaxBody)
	}
	if cfg.MaxPollWait <= 0 {
		cfg.MaxPollWait = 30 * time.Second
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 2 * time.Second
	}
	if cfg.MaxPollBytes <= 0 {
		cfg.MaxPollBytes = defaultPollBytes
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = defaultBodyTimeout
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = defaultMaxConns
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registerer == nil {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		cfg.Registerer = reg
	}
	if cfg.Gatherer == nil {
		if g, ok := cfg.Registerer.(prometheus.Gatherer); ok {
			cfg.Gatherer = g
		} else {
			cfg.Gatherer = prometheus.DefaultGatherer
		}
	}
	s := &Server{cfg: cfg, eng: cfg.Engine, log: cfg.Logger}
	var err error
	if s.creds, err = credentials(cfg); err != nil {
		return nil, err
	}
	s.drainCtx, s.drain = context.WithCancel(context.Background())
	if err := registerMetrics(cfg); err != nil {
		return nil, err
	}
	if !cfg.NoUI {
		uc := ui.Config{Engine: cfg.Engine, Scheduler: cfg.Scheduler, StatusOf: StatusOf, Logger: cfg.Logger,
			Authenticated: trust}
		if len(s.creds) > 0 {
			uc.Login, uc.Secret = s.uiLogin()
		}
		console, err := ui.New(uc)
		if err != nil {
			return nil, err
		}
		s.ui = console
	}
	s.handler = s.routes()
	return s, nil
}

// registerMetrics registers the queue and backfill gauges and the engine's own counters and
// histograms (engine/metrics.go) on cfg.Registerer, all or nothing. A server built again for the
// same engine on the same registry (an fx app built again, a server stopped and made again)
// finds them registered and serves those: they read, and count, that engine. A registry that
// serves another engine's is refused: its gauges would report the other engine's queues, and
// this engine's counts would be served nowhere. Every refusal is X_INVARIANT and leaves the
// registry as it was.
func registerMetrics(cfg Config) error {
	g := promreg.New(cfg.Registerer)
	queues := newQueueCollector(cfg.Engine, cfg.Logger)
	if promreg.Register(g, &queues) && queues.eng != cfg.Engine {
		g.Refuse(errors.New("the registry serves another engine's queue gauges: give each engine a registry of its own"))
	}
	backfills := newBackfillCollector(cfg.Engine, cfg.Logger)
	if promreg.Register(g, &backfills) && backfills.eng != cfg.Engine {
		g.Refuse(errors.New("the registry serves another engine's backfill gauges: give each engine a registry of its own"))
	}
	for _, c := range cfg.Engine.Collectors() {
		own := c
		if promreg.Register(g, &c) && c != own {
			g.Refuse(errors.New("the registry serves another engine's counters: give each engine a registry of its own"))
		}
	}
	if err := g.Err(); err != nil {
		return jobs.Wrap(jobs.CodeInvariant, err, "api: register the metrics")
	}
	return nil
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	// The worker protocol.
	mux.Handle("POST /v1/worker/poll", s.serve(s.poll))
	mux.Handle("POST /v1/worker/record", s.serve(s.record))
	mux.Handle("POST /v1/worker/records", s.serve(s.records))
	mux.Handle("POST /v1/worker/heartbeat", s.serve(s.heartbeat))
	mux.Handle("POST "+framesPath, s.serve(s.frames))
	mux.Handle("POST /v1/worker/history", s.serve(s.workerHistory))
	mux.Handle("POST /v1/worker/start", s.serve(s.workerStart))
	mux.Handle("POST /v1/worker/stop", s.serve(s.workerStop))
	mux.Handle("POST /v1/worker/session", s.serve(s.attend))
	mux.Handle("POST /v1/worker/manifest", s.serve(s.declareManifest))
	mux.Handle("POST /v1/worker/backfill/open", s.serve(s.backfillOpen))
	mux.Handle("POST /v1/worker/backfill/report", s.serve(s.backfillReport))
	// The admin API.
	mux.Handle("POST /v1/runs", s.serve(s.enqueue))
	mux.Handle("POST /v1/runs/bulk", s.serve(s.enqueueMany))
	mux.Handle("GET /v1/runs", s.serve(s.listRuns))
	mux.Handle("GET /v1/runs/{id}", s.serve(s.getRun))
	mux.Handle("GET /v1/runs/{id}/history", s.serve(s.runHistory))
	mux.Handle("POST /v1/runs/{id}/cancel", s.serve(s.cancel))
	mux.Handle("POST /v1/runs/{id}/retry", s.serve(s.retry))
	mux.Handle("POST /v1/events/{name}", s.serve(s.publish))
	mux.Handle("POST /v1/events/{$}", s.serve(s.publish)) // no name: the engine says why not
	mux.Handle("GET /v1/queues", s.serve(s.queues))
	mux.Handle("GET /v1/dead-letters", s.serve(s.deadLetters))
	mux.Handle("GET /v1/codes", s.serve(s.codes))
	mux.Handle("GET /v1/manifest", s.serve(s.manifest))
	mux.Handle("GET /v1/schedules", s.serve(s.listSchedules))
	mux.Handle("GET /v1/schedules/{name}", s.serve(s.getSchedule()))
	mux.Handle("POST /v1/schedules/{name}/pause", s.serve(s.pauseSchedule()))
	mux.Handle("POST /v1/schedules/{name}/resume", s.serve(s.resumeSchedule()))
	mux.Handle("POST /v1/schedules/{name}/trigger", s.serve(s.triggerSchedule()))
	mux.Handle("GET /v1/backfills", s.serve(s.listBackfills))
	mux.Handle("GET /v1/backfills/declared", s.serve(s.declaredBackfills))
	mux.Handle("GET /v1/backfills/pending", s.serve(s.pendingBackfills))
	mux.Handle("GET /v1/overview", s.serve(s.overview))
	mux.Handle("GET /v1/search/runs", s.serve(s.searchRuns))
	mux.Handle("GET /v1/runs/{id}/result", s.serve(s.runResult))
	mux.Handle("GET /v1/whoami", s.serve(s.whoami))
	mux.Handle("GET /v1/retention", s.serve(s.retentionDryRun))
	mux.Handle("POST /v1/retention/run", s.serve(s.retentionRun))
	// Operations.
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{
		// A failing collector (the store is down) must not take the process metrics with it.
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      promLogger{s.log},
	}))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	if s.ui != nil {
		mux.Handle(ui.Prefix+"/", s.ui)
	}
	mux.Handle(MCPPath, s.mcpHandler())
	routed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.unrouted(mux, w, r) {
			mux.ServeHTTP(w, r)
		}
	})
	return s.recover(s.logRequests(s.authenticate(s.limitBody(routed))))
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Start listens on Config.Addr and serves in the background until Stop.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.http != nil {
		return nil
	}
	if len(s.creds) == 0 && !LoopbackAddr(s.cfg.Addr) && !s.cfg.AllowUnauthenticated {
		return jobs.Errorf(jobs.CodeUnauthorized, "api: %s is reachable beyond this machine and no token is set: set a token (api.Config.Token or Credentials; engine serve --token or role tokens), or allow it explicitly (api.Config.AllowUnauthenticated; --allow-unauthenticated)", s.cfg.Addr)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return jobs.Wrap(jobs.CodeListenFailed, err, "api: listen on %s (is the address in use, or not this machine's?)", s.cfg.Addr)
	}
	lim := newLimitListener(ln, s.cfg.MaxConns, len(s.creds) == 0)
	ln = lim
	s.ln = ln
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		// A long-poll holds its response for up to MaxPollWait.
		WriteTimeout: s.cfg.MaxPollWait + time.Minute,
		// An authenticated connection's; one that has not carried an authenticated request
		// waits untrustedIdle, and gives way when the slots are taken (limits.go).
		IdleTimeout: serverIdleTimeout,
		ConnState:   lim.connState,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.done = make(chan struct{})
	srv, done := s.http, s.done
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("jobs.api.serve-failed", "err", err)
		}
	}()
	s.log.Info("jobs.api.listening", "addr", ln.Addr().String(), "auth", len(s.creds) > 0)
	if len(s.creds) == 0 && !s.cfg.AllowUnauthenticated {
		s.log.Warn("jobs.api.unauthenticated", "addr", ln.Addr().String(),
			"hint", "no token is set: the API answers requests from this machine (loopback) only")
	}
	return nil
}

// Addr returns the address the server listens on (with the port the kernel chose for ":0"), or
// "" before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Drain ends the long-polls in progress (they answer with no tasks) and turns /readyz to 503,
// so a load balancer stops routing here. Stop calls it first; it is safe to call more than once.
func (s *Server) Drain() { s.drain() }

// Stop drains, stops accepting connections and waits for the requests in flight to finish, or
// for ctx to end.
func (s *Server) Stop(ctx context.Context) error {
	s.Drain()
	s.mu.Lock()
	srv, done := s.http, s.done
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		// Out of time: cut the connections still open rather than leave the process hanging.
		_ = srv.Close()
	}
	// The upgraded connections answer the call they are serving and end (frames.go).
	framed := make(chan struct{})
	go func() { s.framing.Wait(); close(framed) }()
	select {
	case <-framed:
	case <-ctx.Done():
		if err == nil {
			err = ctx.Err()
		}
	}
	<-done
	return err
}

// Middleware.

// recover turns a panic in a handler into a logged 500 X_INTERNAL instead of a dead connection
// (or, outside net/http's own recover, a dead process). Only real bugs get here: bad input is
// refused with a 4xx before it can panic.
func (s *Server) recover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &responseWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("jobs.api.panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !rw.wrote {
				s.writeError(rw, r, jobs.Errorf(jobs.CodeInternal, "internal error; the engine logged it"))
			}
		}()
		next.ServeHTTP(rw, r)
	})
}

// logRequests writes an access log at debug level: a worker's polls and heartbeats are too many
// for info.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.log.Enabled(r.Context(), slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		began := time.Now()
		next.ServeHTTP(w, r)
		status := http.StatusOK
		if rw, ok := w.(*responseWriter); ok && rw.status != 0 {
			status = rw.status
		}
		s.log.Debug("jobs.api.request", "method", r.Method, "path", r.URL.Path, "status", status,
			"took", time.Since(began).Round(time.Microsecond))
	})
}

// authenticate checks the bearer token on every path but the probes, which a load balancer or
// an orchestrator calls without credentials. It also refuses what only a browser tricked by
// another site would send, because an engine on loopback without a token is otherwise open to
// any web page its operator visits:
//   - a cross-site request (an Origin that is not the engine's own host);
//   - without a token, a request by host name rather than by address: a DNS-rebinding page
//     reaches 127.0.0.1 under its own name, and a token-less engine is only safe by address;
//   - a POST whose body is not declared JSON or msgpack: an HTML form (or a "simple" fetch) can
//     send text/plain or form data across sites without a CORS preflight, but not these.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			next.ServeHTTP(w, r)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !sameHost(origin, r.Host) {
			s.writeError(w, r, jobs.Errorf(jobs.CodeUnauthorized, "cross-site requests are refused (Origin %s)", origin))
			return
		}
		// The console (/_x/) checks its own credentials: a browser sends a session cookie and
		// form posts, not a bearer header and JSON. The checks above and the address rule below
		// still apply to it.
		isUI := s.ui != nil && (r.URL.Path == ui.Prefix || strings.HasPrefix(r.URL.Path, ui.Prefix+"/"))
		if len(s.creds) == 0 {
			if !byAddress(r.Host) {
				s.writeError(w, r, jobs.Errorf(jobs.CodeUnauthorized,
					"this engine has no token, so it serves requests by IP address or localhost only, not by the name %q: set --token / JOBS_TOKEN", r.Host))
				return
			}
			if !s.cfg.AllowUnauthenticated && !loopbackRemote(r) {
				s.writeError(w, r, jobs.Errorf(jobs.CodeUnauthorized,
					"this engine has no token, so it serves this machine (loopback) only: set --token / JOBS_TOKEN"))
				return
			}
		} else if !isUI {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			cred, found := s.creds[sha256.Sum256([]byte(got))]
			if !ok || got == "" || !found {
				w.Header().Set("WWW-Authenticate", `Bearer realm="jobs"`)
				s.writeError(w, r, jobs.Errorf(jobs.CodeUnauthorized, "a valid bearer token is required"))
				return
			}
			r = withCredential(r, cred)
			var err error
			if r, err = s.authorize(r, cred); err != nil {
				s.writeError(w, r, err)
				return
			}
			trust(r)
		}
		if r.Method == http.MethodPost && !isUI && !isMsgpack(r) && !isJSON(r) {
			s.writeError(w, r, jobs.Errorf(jobs.CodeBadRequest,
				"a POST body must be declared Content-Type: application/json (or application/msgpack), got %q", r.Header.Get("Content-Type")))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sameHost reports whether an Origin header names the host the request was sent to.
func sameHost(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}

// byAddress reports whether a Host header is an IP address or localhost, with or without a port.
func byAddress(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.EqualFold(host, "localhost") || net.ParseIP(host) != nil
}

func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
		s.bodyDeadline(w, r)
		next.ServeHTTP(w, r)
	})
}

// handler is a route's body: it writes its success itself and returns its refusal.
type handler func(w http.ResponseWriter, r *http.Request) error

// serve adapts a route's body; its refusal is written in the request's codec (wantsMsgpack).
func (s *Server) serve(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = extractTrace(r) // the caller's span (trace.go)
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// wantsMsgpack reports whether a refusal to r is written in msgpack: worker routes always, admin
// routes when the request came in msgpack (the Go client's enqueue and publish).
func wantsMsgpack(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/v1/worker/") || isMsgpack(r) ||
		strings.Contains(r.Header.Get("Accept"), ContentMsgpack)
}

// writeError answers a refusal with its code, its message and the status of the table.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := s.refusalOf(r, err)
	status := StatusOf(e.Code)
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", retryAfterHeader(e.RetryAfter))
	}
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		// A refused credential ends its connection: a client without a valid token may not keep
		// one of the MaxConns slots the workers need (limits.go).
		w.Header().Set("Connection", "close")
	}
	out := &jobs.Error{Code: e.Code, Message: e.Message, RetryAfter: e.RetryAfter}
	if wantsMsgpack(r) {
		b, err := encodeMsgpack(out)
		if err == nil {
			w.Header().Set("Content-Type", ContentMsgpack)
			w.WriteHeader(status)
			_, _ = w.Write(b)
			return
		}
	}
	writeJSON(w, status, ErrorBody{Error: out})
}

// refusalOf is the *jobs.Error a caller gets for err (logged when it is the engine's fault): a
// whole answer's, or one record's in a batch (records.go). An uncoded err is refused by the
// rule the MCP tools share (internal/refuse), so neither surface shows a store's own text.
func (s *Server) refusalOf(r *http.Request, err error) *jobs.Error {
	e := refuse.Of(r.Context(), s.log, "jobs.api", err, "method", r.Method, "path", r.URL.Path)
	if status := StatusOf(e.Code); status >= 500 && e.Code != jobs.CodeInternal {
		s.log.Warn("jobs.api.unavailable", "method", r.Method, "path", r.URL.Path, "code", e.Code, "err", e.Message)
	}
	return e
}

// healthz answers while the process runs: it is the liveness probe, so it checks nothing else.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// pinger is a store that can be asked whether it is reachable without touching a table.
type pinger interface {
	Ping(ctx context.Context) error
}

// readyz answers 200 when the store answers and the server is not draining.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.drainCtx.Err() != nil {
		s.writeError(w, r, jobs.Errorf(jobs.CodeDraining, "the engine is shutting down"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ReadyTimeout)
	defer cancel()
	var err error
	if p, ok := s.eng.Store().(pinger); ok {
		err = p.Ping(ctx)
	} else {
		// A primary-key lookup of an id no run has: one indexed read, answered by any store
		// that is up. Not found is the healthy answer.
		_, err = s.eng.GetRun(ctx, "00000000-0000-7000-8000-000000000000")
		if jobs.HasCode(err, jobs.CodeRunNotFound) {
			err = nil
		}
	}
	if err != nil {
		if jobs.CodeOf(err) == "" {
			err = jobs.Wrap(jobs.CodeStoreUnavailable, err, "the store did not answer")
		}
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// responseWriter remembers whether the header went out (and its status), so the recover
// middleware knows whether it can still answer and the access log what was answered. Unwrap lets http.ResponseController reach the connection's Flusher.
type responseWriter struct {
	http.ResponseWriter
	wrote  bool
	status int
}

func (w *responseWriter) WriteHeader(status int) {
	if !w.wrote {
		w.status = status
	}
	w.wrote = true
	w.ResponseWriter.WriteHeader(status)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *responseWriter) Flush() {
	w.wrote = true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// promLogger routes promhttp's collection errors to slog.
type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) {
	l.log.Warn("jobs.metrics.collect-failed", "err", fmt.Sprint(v...))
}
