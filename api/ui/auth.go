package ui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ultimat3/jobs"
)

// Browser sessions. A browser cannot send the API's bearer header on a link or a form, so the
// login form takes the same token once and answers with a session cookie (HttpOnly: no script
// reads it; SameSite=Strict: no other site's page sends it). The cookie is stateless —
// "<issued unix>.<random>.<role>.<mac>" under a key derived from the credentials (Config.Secret:
// the API derives it from every credential's token digest, role and tenant) — so it survives a
// restart, needs no table, and every session ends when a credential changes: a token rotated or
// removed, or its role or tenant changed, since the role the cookie carries is the one its token
// had at login. The CSRF token of a session is another MAC of the same random part: bound to the
// session, never stored, and useless to a page that cannot read this one.
//
// Without a token the engine is open on loopback (as the API is), and the UI still hands out an
// anonymous session, because an action must carry a CSRF token bound to something: another
// site's page must not be able to drive a form POST at 127.0.0.1.

const (
	sessionCookie = "jobs_session"
	// sessionTTL bounds a session's life: a forgotten laptop does not stay logged in forever.
	sessionTTL = 12 * time.Hour
)

// who is the result of authorize: whether the request may see and whether it may act.
type who struct {
	// session is the random part of the browser session ("" for a bearer request).
	session string
	// bearer: the request carried the token itself (curl, a script). No cookie was sent
	// automatically, so no CSRF token is needed.
	bearer bool
	// canAct: an operator. Today every authenticated caller is; roles (a viewer sees, an
	// operator acts) plug in here.
	canAct bool
}

// sessionKey derives the MAC key: from the secret when one is set (the credentials, as the API
// words them), so sessions end when it changes; otherwise random per process.
func sessionKey(secret string) []byte {
	if secret == "" {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		return k
	}
	sum := sha256.Sum256([]byte("jobs /_x session\x00" + secret))
	return sum[:]
}

func (u *UI) mac(parts ...string) string {
	m := hmac.New(sha256.New, u.key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// newSession returns a fresh cookie value and its random part. The cookie carries (under its
// MAC) whether the token that logged in may act, so a viewer's session stays a viewer's. That is
// true only as long as the credentials are: the key covers them (sessionKey), so a token demoted,
// scoped to a tenant or removed ends the sessions it opened instead of keeping its old role.
func (u *UI) newSession(act bool) (value, id string) {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	id = base64.RawURLEncoding.EncodeToString(b)
	issued := strconv.FormatInt(u.clock.Now().Unix(), 10)
	role := "v"
	if act {
		role = "o"
	}
	return issued + "." + id + "." + role + "." + u.mac("session", issued, id, role), id
}

// session returns the random part of a valid, unexpired session cookie ("" when there is
// none) and whether it may act.
func (u *UI) session(r *http.Request) (string, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", false
	}
	parts := strings.Split(c.Value, ".")
	if len(parts) != 4 || (parts[2] != "v" && parts[2] != "o") {
		return "", false
	}
	if subtle.ConstantTimeCompare([]byte(parts[3]), []byte(u.mac("session", parts[0], parts[1], parts[2]))) != 1 {
		return "", false
	}
	issued, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return "", false
	}
	age := u.clock.Now().Sub(time.Unix(issued, 0))
	if age < -time.Minute || age > sessionTTL {
		return "", false
	}
	return parts[1], parts[2] == "o"
}

func (u *UI) setSession(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: value, Path: u.prefix + "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

// csrf is the CSRF token of a session.
func (u *UI) csrf(session string) string {
	if session == "" {
		return ""
	}
	return u.mac("csrf", session)
}

// authorize is the one place that decides who a request is. It answers X_UNAUTHORIZED when a
// token is configured and the request carries neither a valid session nor the bearer token.
func (u *UI) authorize(r *http.Request) (who, error) {
	if got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && u.loginFn != nil {
		if ok, act := u.loginFn(got); ok {
			u.authenticated(r)
			return who{bearer: true, canAct: act}, nil
		}
		return who{}, jobs.Errorf(jobs.CodeUnauthorized, "a valid bearer token is required")
	}
	if s, act := u.session(r); s != "" {
		if u.loginFn == nil {
			act = true // an open console: every visitor acts, as on the API without tokens
		}
		u.authenticated(r)
		return who{session: s, canAct: act}, nil
	}
	if u.loginFn == nil {
		return who{canAct: true}, nil // open; a session is handed out on the first page
	}
	return who{}, jobs.Errorf(jobs.CodeUnauthorized, "log in with the engine's token to use this page")
}

// mayAct refuses an action (a POST) that its caller may not take: a viewer, or a browser
// request without its session's CSRF token.
func (u *UI) mayAct(r *http.Request, w who) error {
	if !w.canAct {
		return jobs.Errorf(jobs.CodeForbidden, "your role may look but not act")
	}
	return u.checkCSRF(r, w)
}

// checkCSRF refuses a browser's form POST without its session's CSRF token; a bearer request
// needs none (no browser sends that header by itself).
func (u *UI) checkCSRF(r *http.Request, w who) error {
	if w.bearer {
		return nil
	}
	want := u.csrf(w.session)
	got := r.PostFormValue("csrf")
	if want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return jobs.Errorf(jobs.CodeForbidden, "the form's CSRF token is missing or not this session's: reload the page and try again")
	}
	return nil
}

// authenticated tells the server (Config.Authenticated) that r carried a valid credential.
func (u *UI) authenticated(r *http.Request) {
	if u.authed != nil {
		u.authed(r)
	}
}
