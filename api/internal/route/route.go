// Package route says why a ServeMux routes a request nowhere, as an X_ refusal: the API server
// (package api) and its console (package api/ui) answer an unknown path and a wrong method alike,
// each in its own shape (a JSON or msgpack refusal, an error page).
package route

import (
	"net/http"

	"github.com/ultimat3/jobs"
)

// Refusal returns the refusal of a request mux routes to no handler, and nil when it routes it:
// X_METHOD_NOT_ALLOWED when the path exists for other methods, with allow the methods it takes
// (the caller's Allow header), else X_ROUTE_NOT_FOUND.
func Refusal(mux *http.ServeMux, r *http.Request) (refusal *jobs.Error, allow string) {
	h, pattern := mux.Handler(r)
	if pattern != "" {
		return nil, ""
	}
	// What net/http's own not-found handler would answer, without writing it.
	probe := &statusProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		allow = probe.header.Get("Allow")
		return jobs.Errorf(jobs.CodeMethodNotAllowed, "%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow), allow
	}
	return jobs.Errorf(jobs.CodeRouteNotFound, "no route for %s %s", r.Method, r.URL.Path), ""
}

// statusProbe records what a handler answers, and writes nothing.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header { return p.header }
func (p *statusProbe) WriteHeader(status int) {
	if p.status == 0 {
		p.status = status
	}
}
func (p *statusProbe) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.status = http.StatusOK
	}
	return len(b), nil
}
