// Package ui is the engine's operator console, served under /_x/ by the API server: an
// overview of every queue, a run finder, a run's full trace and history with its actions
// (cancel, retry, retry from a step), the dead letters, the backfills (declared, per environment,
// and the ledger with live progress), the schedules (pause, resume, trigger) and the fleet's
// manifest and workers.
//
// It is server-rendered with html/template from embedded files, with one small script for
// relative times and confirmations: no build step, no external fonts or CDNs, and it works in a
// closed network. Every number a page shows comes from the engine's projections (engine/inspect*.go),
// the same ones the CLI and the JSON API render, so no two surfaces can disagree.
//
// Pages are a registry (Pages): a new page is a template in assets/ and one entry naming its
// path, title and data loader, and the navigation follows.
package ui

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api/internal/route"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/scheduler"
)

// Prefix is where the API server mounts the console.
const Prefix = "/_x"

//go:embed assets
var assets embed.FS

// Config configures the console.
type Config struct {
	// Engine answers every page. Required.
	Engine *engine.Engine
	// Scheduler answers the schedules page and its actions. Optional: without one the page
	// says the engine runs no scheduler.
	Scheduler *scheduler.Scheduler
	// Token is the API's bearer token; "" leaves the console open, as the API is (loopback),
	// unless Login is set.
	Token string
	// Authenticated, when set, is told of each request that carried a valid session or token:
	// the server keeps such a request's connection as it keeps an API client's (its idle time,
	// and its slot when the connections are at their cap), where a connection that never
	// authenticated idles out in seconds and gives way.
	Authenticated func(*http.Request)
	// Login decides what a presented token (the login form, or a bearer header) may do: ok when
	// it may look, act when it may also act. Optional: by default the one Token, which may act.
	// The API server sets it from its credentials, so a viewer's token sees and an operator's
	// acts.
	Login func(token string) (ok, act bool)
	// Secret keys the session cookies; sessions end when it changes. Defaults to Token.
	Secret string
	// StatusOf maps a refusal's X_ code to its HTTP status: the API's one table.
	StatusOf func(jobs.Code) int
	// Clock drives relative times and session expiry. Defaults to the engine's.
	Clock  clock.Clock
	Logger *slog.Logger
}

// Page is one page of the navigation.
type Page struct {
	// Path is under the prefix: "/" for the overview, "/schedules", …
	Path  string
	Title string
	// Template names assets/<Template>.html, which defines "content" (rendered in the layout).
	Template string
	// Data loads what the template shows (its .Data).
	Data func(r *Request) (any, error)
}

// Request is what a page's Data loader gets: the HTTP request, the engine, the time the page
// is rendered at.
type Request struct {
	*http.Request
	Engine *engine.Engine
	// Scheduler is the console's scheduler; nil when the engine runs none.
	Scheduler *scheduler.Scheduler
	Now       time.Time
}

// Pages is the navigation, in order.
var Pages = []Page{
	{Path: "/", Title: "Overview", Template: "overview", Data: overviewData},
	{Path: "/runs", Title: "Runs", Template: "runs", Data: runsData},
	{Path: "/dead-letters", Title: "Dead letters", Template: "dead", Data: deadData},
	{Path: "/backfills", Title: "Backfills", Template: "backfills", Data: backfillsData},
	{Path: "/schedules", Title: "Schedules", Template: "schedules", Data: schedulesData},
	{Path: "/manifest", Title: "Manifest & workers", Template: "manifest", Data: manifestData},
}

// UI is the console's handler.
type UI struct {
	eng   *engine.Engine
	sched *scheduler.Scheduler
	// loginFn is Config.Login; nil: the console is open.
	loginFn func(token string) (ok, act bool)
	// authed is Config.Authenticated.
	authed func(*http.Request)
	key    []byte
	status func(jobs.Code) int
	clock  clock.Clock
	log    *slog.Logger
	prefix string
	pages  map[string]*template.Template
	static http.Handler
	mux    *http.ServeMux
}

// New returns the console, to be mounted at Prefix.
func New(cfg Config) (*UI, error) {
	if cfg.Engine == nil {
		return nil, jobs.Errorf(jobs.CodeInvariant, "ui: Config.Engine is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = cfg.Engine.Clock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StatusOf == nil {
		cfg.StatusOf = func(jobs.Code) int { return http.StatusBadRequest }
	}
	if cfg.Login == nil && cfg.Token != "" {
		sum := sha256.Sum256([]byte(cfg.Token))
		cfg.Login = func(got string) (bool, bool) {
			g := sha256.Sum256([]byte(got))
			ok := subtle.ConstantTimeCompare(g[:], sum[:]) == 1
			return ok, ok
		}
	}
	if cfg.Secret == "" {
		cfg.Secret = cfg.Token
	}
	u := &UI{eng: cfg.Engine, sched: cfg.Scheduler, loginFn: cfg.Login, authed: cfg.Authenticated, key: sessionKey(cfg.Secret), status: cfg.StatusOf,
		clock: cfg.Clock, log: cfg.Logger, prefix: Prefix, pages: map[string]*template.Template{}}
	if err := u.parse(); err != nil {
		return nil, err
	}
	static, _ := fs.Sub(assets, "assets/static")
	u.static = http.StripPrefix(u.prefix+"/static/", http.FileServerFS(static))
	u.routes()
	return u, nil
}

// parse builds one template set per page: the layout and partials, plus the page's "content".
func (u *UI) parse() error {
	base, err := template.New("layout").Funcs(funcs(u)).ParseFS(assets, "assets/layout.html")
	if err != nil {
		return jobs.Wrap(jobs.CodeInvariant, err, "ui: parse the layout")
	}
	names := []string{"run", "login", "error"}
	for _, p := range Pages {
		names = append(names, p.Template)
	}
	for _, n := range names {
		t, err := template.Must(base.Clone()).ParseFS(assets, "assets/"+n+".html")
		if err != nil {
			return jobs.Wrap(jobs.CodeInvariant, err, "ui: parse page %s", n)
		}
		u.pages[n] = t
	}
	return nil
}

func (u *UI) routes() {
	m := http.NewServeMux()
	for _, p := range Pages {
		pattern := "GET " + u.prefix + p.Path
		if p.Path == "/" {
			pattern += "{$}"
		}
		m.Handle(pattern, u.page(p.Title, p.Template, p.Data))
	}
	m.Handle("GET "+u.prefix+"/runs/{id}", u.page("Run", "run", runData))
	m.Handle("POST "+u.prefix+"/runs/{id}/cancel", u.action(u.cancel))
	m.Handle("POST "+u.prefix+"/runs/{id}/retry", u.action(u.retry))
	m.Handle("POST "+u.prefix+"/schedules/{name}/{verb}", u.action(u.scheduleAction))
	m.HandleFunc("GET "+u.prefix+"/login", u.loginForm)
	m.HandleFunc("POST "+u.prefix+"/login", u.login)
	// Logging out changes nothing but the browser's own cookie, so a viewer may: it needs the
	// session's CSRF token (another site must not end it), not the role an action needs.
	m.Handle("POST "+u.prefix+"/logout", u.form(u.checkCSRF, u.logout))
	m.Handle("GET "+u.prefix+"/static/", u.static)
	m.HandleFunc(u.prefix, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, u.prefix+"/", http.StatusMovedPermanently)
	})
	// No catch-all: a request no pattern takes is refused by ServeHTTP as the API refuses one.
	u.mux = m
}

// ServeHTTP implements http.Handler.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// The console's own files only: no inline script, no other origin, never framed.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	// An unknown page is 404 X_ROUTE_NOT_FOUND, a wrong method 405 X_METHOD_NOT_ALLOWED with
	// Allow: the API's codes and statuses (route.Refusal), rendered as the console's error page.
	if e, allow := route.Refusal(u.mux, r); e != nil {
		if allow != "" {
			h.Set("Allow", allow)
		}
		u.fail(w, r, who{}, e)
		return
	}
	u.mux.ServeHTTP(w, r)
}

// view is what the layout renders.
type view struct {
	Title   string
	Prefix  string
	Nav     []Page
	Active  string
	CSRF    string
	Now     time.Time
	AuthOn  bool
	Session bool
	// CanAct is false for a viewer: the page shows no action buttons (the POST is refused anyway).
	CanAct bool
	Notice string
	Data   any
	// Error, on the error page.
	Code    jobs.Code
	Message string
	Status  int
}

// page serves a GET page: authorize, load, render whole before the first byte goes out (so a
// failure is still a clean error page).
func (u *UI) page(title, tmpl string, data func(*Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		me, err := u.authorize(r)
		if err != nil {
			u.fail(w, r, me, err)
			return
		}
		me = u.ensureSession(w, r, me)
		now := u.clock.Now()
		d, err := data(&Request{Request: r, Engine: u.eng, Scheduler: u.sched, Now: now})
		if err != nil {
			u.fail(w, r, me, err)
			return
		}
		u.render(w, r, http.StatusOK, tmpl, u.view(r, me, title, now, d))
	})
}

// ensureSession hands an open console's visitor an anonymous session, so its forms carry a
// CSRF token.
func (u *UI) ensureSession(w http.ResponseWriter, r *http.Request, me who) who {
	if me.session == "" && !me.bearer {
		v, id := u.newSession(me.canAct)
		u.setSession(w, r, v, int(sessionTTL.Seconds()))
		me.session = id
	}
	return me
}

func (u *UI) view(r *http.Request, me who, title string, now time.Time, d any) *view {
	active := strings.TrimPrefix(r.URL.Path, u.prefix)
	if strings.HasPrefix(active, "/runs/") {
		active = "/runs"
	}
	return &view{Title: title, Prefix: u.prefix, Nav: Pages, Active: active, CSRF: u.csrf(me.session), Now: now,
		AuthOn: u.loginFn != nil, Session: me.session != "", CanAct: me.canAct, Notice: notices[r.URL.Query().Get("notice")], Data: d}
}

func (u *UI) render(w http.ResponseWriter, r *http.Request, status int, tmpl string, v *view) {
	var buf bytes.Buffer
	if err := u.pages[tmpl].ExecuteTemplate(&buf, "layout", v); err != nil {
		u.log.Error("jobs.ui.render", "page", tmpl, "path", r.URL.Path, "err", err)
		http.Error(w, "X_INTERNAL: the page failed to render; the engine logged it", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail renders a refusal as a page with its X_ code and the API's status for it. An
// unauthenticated visitor gets the login form.
func (u *UI) fail(w http.ResponseWriter, r *http.Request, me who, err error) {
	var e *jobs.Error
	if !errors.As(err, &e) {
		if r.Context().Err() != nil {
			return
		}
		u.log.Error("jobs.ui.internal", "method", r.Method, "path", r.URL.Path, "err", err)
		e = jobs.Errorf(jobs.CodeInternal, "internal error; the engine logged it")
	}
	status := u.status(e.Code)
	v := u.view(r, me, "Error", u.clock.Now(), nil)
	v.Code, v.Message, v.Status = e.Code, e.Message, status
	tmpl := "error"
	if e.Code == jobs.CodeUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="jobs"`)
		v.Title, v.Nav, tmpl = "Log in", nil, "login"
	}
	u.render(w, r, status, tmpl, v)
}
