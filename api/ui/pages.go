package ui

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api/paging"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// The data loaders: each turns a request into the engine's projection for it, and computes
// nothing the projection does not already hold.

func overviewData(r *Request) (any, error) {
	return r.Engine.InspectOverview(r.Context(), 0, 0)
}

// runsView is the run finder: the filter as typed, and one page.
type runsView struct {
	Filter engine.RunFilter
	// From and To echo the time filter as the datetime-local inputs show it.
	From, To string
	States   []store.State
	Page     engine.RunPage
	// Newer is set on pages past the first, to go back to the newest.
	Newer bool
	// NextURL is the link to the following page, keeping the filter.
	NextURL string
}

// timeInput is the format of <input type="datetime-local">, read as UTC.
const timeInput = "2006-01-02T15:04"

func runsData(r *Request) (any, error) {
	q := r.URL.Query()
	f := engine.RunFilter{Queue: q.Get("queue"), State: store.State(q.Get("state")), Job: q.Get("job"),
		Tenant: q.Get("tenant"), Search: q.Get("q"), Before: q.Get("before")}
	v := &runsView{States: store.States, From: q.Get("from"), To: q.Get("to"), Newer: f.Before != ""}
	var err error
	if f.CreatedFrom, err = parseTime("from", v.From); err != nil {
		return nil, err
	}
	if f.CreatedTo, err = parseTime("to", v.To); err != nil {
		return nil, err
	}
	// The page by the rule of every listing (package paging), as the JSON API reads it.
	if err := paging.Cursor(f.Before); err != nil {
		return nil, err
	}
	if f.Limit, err = paging.Limit(q.Get("limit"), paging.Default, paging.Max); err != nil {
		return nil, err
	}
	v.Filter = f
	if v.Page, err = r.Engine.SearchRuns(r.Context(), f); err != nil {
		return nil, err
	}
	if v.Page.Next != "" {
		next := url.Values{}
		for k, vs := range q {
			if k != "before" && len(vs) > 0 && vs[0] != "" {
				next.Set(k, vs[0])
			}
		}
		next.Set("before", v.Page.Next)
		v.NextURL = "?" + next.Encode()
	}
	return v, nil
}

func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{timeInput, "2006-01-02T15:04:05", time.RFC3339} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, jobs.Errorf(jobs.CodeBadRequest, "%s %q: want a time like 2026-01-31T14:05 (UTC)", field, s)
}

// deadView is one page of dead letters.
type deadView struct {
	Runs    []engine.RunSummary
	Next    string
	Newer   bool
	NextURL string
}

const deadPage = 50

func deadData(r *Request) (any, error) {
	q := r.URL.Query()
	p := store.ListParams{Queue: q.Get("queue"), Before: q.Get("before"), Limit: deadPage + 1}
	if err := jobs.ValidIdentifier("queue", p.Queue); err != nil {
		return nil, err
	}
	if err := paging.Cursor(p.Before); err != nil {
		return nil, err
	}
	runs, err := r.Engine.InspectDeadLetters(r.Context(), p)
	if err != nil {
		return nil, err
	}
	v := &deadView{Runs: runs, Newer: p.Before != ""}
	if len(runs) > deadPage {
		v.Runs, v.Next = runs[:deadPage], runs[deadPage-1].ID
		next := url.Values{"before": {v.Next}}
		if p.Queue != "" {
			next.Set("queue", p.Queue)
		}
		v.NextURL = "?" + next.Encode()
	}
	return v, nil
}

// runView is a run's page: the engine's RunView, and its history as a timeline, each bounded in
// rows and in bytes (timelineCap and the bounds beside it).
type runView struct {
	Run engine.RunView
	// Input and Result are the run's, as the page shows them (cut to payloadCap).
	Input, Result *shown
	// Steps are the trace's newest stepsCap durable calls unless the page asked for all
	// (?history=all); StepsTotal is how many the trace holds.
	Steps          []stepRow
	StepsTotal     int
	StepsTruncated bool
	Timeline       []eventView
	// RetrySteps are the steps a retry may start from: completed ones, not discarded, among the
	// calls the Steps table shows. A name a form cannot post as it is (one holding a line
	// break, which the browser rewrites as CRLF) is left out, and counted in Unpostable.
	RetrySteps []string
	Unpostable int
	CanCancel  bool
	CanRetry   bool
	// Events is the history's length; Timeline holds the newest timelineCap of them unless the
	// page asked for all (?history=all).
	Events    int
	Truncated bool
	// Backfill is the ledger row when the run is a backfill pass.
	Backfill *engine.BackfillPass
}

// A run page is bounded in rows and in bytes. The page is rendered whole into memory before its
// first byte goes out, and a history may hold any number of events of up to MaxPayload (1 MiB)
// each, rendered larger again as indented JSON: without these, a dozen legal steps made a page
// of over 100 MB. What a cap leaves out, `engine history dump <run>` shows whole.
const (
	// timelineCap bounds the events a run page renders by default: a run with a hundred
	// thousand recorded events must not make its page a hundred-megabyte document. Only the
	// newest timelineCap events are read from the store.
	timelineCap = 1000
	// stepsCap bounds the rows of the Steps table (and so the retry-from-step choices) the
	// same way.
	stepsCap = timelineCap
	// payloadCap bounds one payload as the page shows it (the input, the result, a step's
	// output or note, an event's payload), in bytes of the page: its rendered text, escaped.
	payloadCap = 64 << 10
	// sectionBudget bounds the payloads of the Steps table, and those of the timeline, each
	// section handing its budget out newest first: past it, a payload shows only its size.
	sectionBudget = 1 << 20
)

// shown is a payload as the page shows it.
type shown struct {
	// Text is what the page shows: the start of the rendered text, or all of it.
	Text string
	// Cut is how many bytes of it the page leaves out (0: none).
	Cut int
}

// budget hands out a section's bytes to its payloads.
type budget struct{ left int }

// show renders a payload of size stored bytes and cuts it to payloadCap and to what is left of
// the budget; with nothing left it is not rendered at all, and shows only its stored size.
func (b *budget) show(size int, render func() string) *shown {
	if b.left <= 0 {
		return &shown{Cut: size}
	}
	text := render()
	head, used := cutHTML(text, min(payloadCap, b.left))
	b.left -= used
	return &shown{Text: head, Cut: len(text) - len(head)}
}

// cutHTML returns the longest start of s, in whole runes, whose HTML-escaped form (as
// html/template writes text: &lt; &#34; …) is at most limit bytes, and that form's size.
func cutHTML(s string, limit int) (string, int) {
	n := 0
	for i, r := range s {
		w := utf8.RuneLen(r)
		switch r {
		case '<', '>':
			w = 4
		case '&', '"', '\'', '+':
			w = 5
		case utf8.RuneError, 0:
			w = 3 // written as U+FFFD
		}
		if n+w > limit {
			return s[:i], n
		}
		n += w
	}
	return s, n
}

// stepRow is one durable call of the Steps table. Its Output and Note, cut to the page's
// bounds, shadow the StepView's own.
type stepRow struct {
	engine.StepView
	Output *shown // nil: the call has no output
	Note   *shown // nil: no note
}

// eventView is one history event with its payload as people read it (history.View, as the
// dump shows it), cut to the page's bounds.
type eventView struct {
	Seq     int64
	Kind    history.Kind
	Name    string
	At      time.Time
	Payload *shown
}

func runData(r *Request) (any, error) {
	id := r.PathValue("id")
	if err := jobs.ValidIdentifier("run id", id); err != nil {
		return nil, err
	}
	rv, err := r.Engine.InspectRun(r.Context(), id)
	if err != nil {
		return nil, err
	}
	all := r.URL.Query().Get("history") == "all"
	// Seqs are contiguous from 1, so the newest timelineCap events are those after
	// LastSeq-timelineCap: read only them. Events appended since InspectRun are read too, and
	// cut below.
	var after int64
	if !all {
		after = max(0, rv.LastSeq-timelineCap)
	}
	events, err := r.Engine.History(r.Context(), id, after)
	if err != nil {
		return nil, err
	}
	v := &runView{Run: rv, Events: int(rv.LastSeq),
		CanCancel: !rv.State.Finished(), CanRetry: rv.State == store.StateFailed || rv.State == store.StateBlocked}
	if n := len(events); n > 0 {
		v.Events = max(v.Events, int(events[n-1].Seq))
	}
	if v.Backfill, err = r.Engine.InspectBackfillPass(r.Context(), id); err != nil {
		return nil, err
	}
	if !all && len(events) > timelineCap {
		events = events[len(events)-timelineCap:]
	}
	v.Truncated = len(events) > 0 && events[0].Seq > 1
	one := func(raw json.RawMessage) *shown {
		if len(raw) == 0 {
			return nil
		}
		b := budget{left: payloadCap}
		return b.show(len(raw), func() string { return pretty(raw) })
	}
	v.Input, v.Result = one(rv.Input), one(rv.Result)

	steps := rv.Steps
	v.StepsTotal = len(steps)
	if !all && len(steps) > stepsCap {
		steps, v.StepsTruncated = steps[len(steps)-stepsCap:], true
	}
	v.Steps = make([]stepRow, len(steps))
	sb := budget{left: sectionBudget}
	for i := len(steps) - 1; i >= 0; i-- { // newest first
		s := steps[i]
		row := stepRow{StepView: s}
		if len(s.Output) > 0 {
			row.Output = sb.show(len(s.Output), func() string { return pretty(s.Output) })
		}
		if s.Note != "" {
			row.Note = sb.show(len(s.Note), func() string { return s.Note })
		}
		v.Steps[i] = row
	}
	v.Timeline = make([]eventView, len(events))
	tb := budget{left: sectionBudget}
	for i := len(events) - 1; i >= 0; i-- { // newest first
		e := events[i]
		v.Timeline[i] = eventView{Seq: e.Seq, Kind: e.Kind, Name: e.Name, At: e.At,
			Payload: tb.show(len(e.Data), func() string { return pretty(history.View(e)) })}
	}
	seen := map[string]bool{}
	for _, s := range steps {
		if s.Kind == "step" && s.Status == "completed" && !seen[s.Name] {
			seen[s.Name] = true
			if strings.ContainsAny(s.Name, "\r\n") {
				v.Unpostable++
				continue
			}
			v.RetrySteps = append(v.RetrySteps, s.Name)
		}
	}
	return v, nil
}

// pretty renders a value as indented JSON for a <pre>.
func pretty(v any) string {
	var b []byte
	switch x := v.(type) {
	case json.RawMessage:
		var buf bytes.Buffer
		if len(x) == 0 {
			return ""
		}
		if err := json.Indent(&buf, x, "", "  "); err != nil {
			return string(x)
		}
		return buf.String()
	default:
		var err error
		if b, err = json.MarshalIndent(x, "", "  "); err != nil {
			return "(not renderable: " + err.Error() + ")"
		}
	}
	return string(b)
}

// Actions. Each is a POST behind the page's confirmation and the session's CSRF token; it
// answers with a redirect to the run's page (POST-redirect-GET), where the history shows what
// it did.

// action authorizes an action and checks its CSRF token before anything changes.
func (u *UI) action(h func(w http.ResponseWriter, r *http.Request, me who) error) http.Handler {
	return u.form(u.mayAct, h)
}

// form serves a form POST: who the caller is, then check (the role and the CSRF token for an
// action, the CSRF token alone for logging out), then h.
func (u *UI) form(check func(r *http.Request, me who) error, h func(w http.ResponseWriter, r *http.Request, me who) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		me, err := u.authorize(r)
		if err == nil {
			err = check(r, me)
		}
		if err == nil {
			err = h(w, r, me)
		}
		if err != nil {
			u.fail(w, r, me, err)
		}
	})
}

// actor names who acted, for the history's audit trail.
func actor(me who) string {
	if me.bearer {
		return "ui (bearer token)"
	}
	return "ui"
}

func (u *UI) cancel(w http.ResponseWriter, r *http.Request, me who) error {
	id := r.PathValue("id")
	if err := jobs.ValidIdentifier("run id", id); err != nil {
		return err
	}
	reason := r.PostFormValue("reason")
	if reason == "" {
		reason = "cancelled from the console"
	}
	if err := jobs.ValidIdentifier("reason", reason); err != nil {
		return err
	}
	// The engine holds the reason to 1,000 bytes, the console's note of who acted included: a
	// reason that fits alone may not with it, and is refused here in the console's words.
	by := " (by " + actor(me) + ")"
	if room := jobs.MaxIdentifier - len(by); len(reason) > room {
		return jobs.Errorf(jobs.CodeBadRequest, "reason is %d bytes; the console takes at most %d (it adds %q)", len(reason), room, by)
	}
	if _, err := u.eng.Cancel(r.Context(), id, reason+by); err != nil {
		return err
	}
	u.log.Info("jobs.ui.cancel", "run", id, "by", actor(me))
	http.Redirect(w, r, u.prefix+"/runs/"+url.PathEscape(id)+"?notice=cancelled", http.StatusSeeOther)
	return nil
}

func (u *UI) retry(w http.ResponseWriter, r *http.Request, me who) error {
	id := r.PathValue("id")
	req := engine.RetryRequest{RunID: id, FromStep: r.PostFormValue("fromStep"), By: actor(me),
		Reason: r.PostFormValue("reason")}
	for field, v := range map[string]string{"run id": id, "fromStep": req.FromStep, "reason": req.Reason} {
		if err := jobs.ValidIdentifier(field, v); err != nil {
			return err
		}
	}
	if _, err := u.eng.Retry(r.Context(), req); err != nil {
		return err
	}
	u.log.Info("jobs.ui.retry", "run", id, "fromStep", req.FromStep, "by", actor(me))
	http.Redirect(w, r, u.prefix+"/runs/"+url.PathEscape(id)+"?notice=retried", http.StatusSeeOther)
	return nil
}

// Login and logout.

func (u *UI) loginForm(w http.ResponseWriter, r *http.Request) {
	if u.loginFn == nil {
		http.Redirect(w, r, u.prefix+"/", http.StatusSeeOther)
		return
	}
	u.render(w, r, http.StatusOK, "login", u.view(r, who{}, "Log in", u.clock.Now(), nil))
}

func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	if u.loginFn == nil {
		http.Redirect(w, r, u.prefix+"/", http.StatusSeeOther)
		return
	}
	ok, act := u.loginFn(r.PostFormValue("token"))
	if !ok {
		u.fail(w, r, who{}, jobs.Errorf(jobs.CodeUnauthorized, "that token may not use the console"))
		return
	}
	v, _ := u.newSession(act)
	u.setSession(w, r, v, int(sessionTTL.Seconds()))
	u.log.Info("jobs.ui.login", "remote", r.RemoteAddr)
	http.Redirect(w, r, u.prefix+"/", http.StatusSeeOther)
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request, _ who) error {
	u.setSession(w, r, "", -1)
	http.Redirect(w, r, u.prefix+"/login", http.StatusSeeOther)
	return nil
}
