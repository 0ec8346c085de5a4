package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// tsCreds are the credentials of the tenancy tests: an admin, acme's operator and viewer, and
// another tenant's operator.
var tsCreds = []api.Credential{
	{Token: "ts-acme-op", Role: api.RoleOperator, Tenant: "acme"},
	{Token: "ts-acme-view", Role: api.RoleViewer, Tenant: "acme"},
	{Token: "ts-other-op", Role: api.RoleOperator, Tenant: "other"},
}

const tsAdmin = "ts-admin"

// tsRefusal reads a JSON refusal's code and message.
func tsRefusal(t *testing.T, body []byte) (jobs.Code, string) {
	t.Helper()
	var eb api.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error == nil {
		t.Fatalf("not a JSON refusal: %q", body)
	}
	return eb.Error.Code, eb.Error.Message
}

// tsHead sends a HEAD and returns its status and Content-Length.
func tsHead(t *testing.T, b *bundle, path, token string) (int, int64) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodHead, b.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode, res.ContentLength
}

// A HEAD is served by the GET's handler (net/http's ServeMux), so authorize holds it to the
// GET's rule: a tenant-scoped credential's HEAD of a listing is refused for another tenant and
// filtered to its own, as the GET is. It used to be neither: the listing of every tenant was
// built, and its Content-Length told acme's viewer how many of another tenant's runs matched.
func TestAHeadIsHeldToTheGetsTenantScope(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{Token: tsAdmin, Credentials: tsCreds})
	for i := range 3 {
		if _, err := b.env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "ts-secret", Queue: "q", Key: "g" + strconv.Itoa(i), Tenant: "globex"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "ts-secret", Queue: "q", Key: "a", Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/runs?tenant=globex", "/v1/runs?tenant=globex&job=ts-secret", "/v1/dead-letters?tenant=globex"} {
		st, _, body := b.call(t, http.MethodGet, path, "", "ts-acme-view", nil)
		if st != http.StatusForbidden {
			t.Fatalf("GET %s as acme: %d %s", path, st, body)
		}
		if st, _ := tsHead(t, b, path, "ts-acme-view"); st != http.StatusForbidden {
			t.Errorf("HEAD %s as acme = %d; the GET is 403", path, st)
		}
	}
	for _, path := range []string{"/v1/runs?job=ts-secret", "/v1/runs", "/v1/dead-letters", "/v1/runs?tenant=acme&job=ts-secret"} {
		st, _, body := b.call(t, http.MethodGet, path, "", "ts-acme-view", nil)
		if st != http.StatusOK {
			t.Fatalf("GET %s as acme: %d %s", path, st, body)
		}
		hst, n := tsHead(t, b, path, "ts-acme-view")
		if hst != http.StatusOK || n != int64(len(body)) {
			t.Errorf("HEAD %s as acme = %d, Content-Length %d; the GET (acme's listing) is 200 with %d bytes", path, hst, n, len(body))
		}
	}
	// An unscoped credential's HEAD is the GET's as well: the listing of every tenant.
	_, _, all := b.call(t, http.MethodGet, "/v1/runs?job=ts-secret", "", tsAdmin, nil)
	if st, n := tsHead(t, b, "/v1/runs?job=ts-secret", tsAdmin); st != http.StatusOK || n != int64(len(all)) {
		t.Errorf("HEAD as the admin = %d, %d bytes; want 200, %d", st, n, len(all))
	}
}

// The engine dedupes a run's durable enqueues and child starts under "call:<run>/<call name>".
// A caller's dedupe id in that namespace is refused (X_BAD_REQUEST), on every enqueue path: one
// that took it would have a run, whose id the caller learnt or guessed, handed the caller's run
// for its call, or refused it (X_IDEMPOTENCY_KEY_TAKEN, another tenant's), failing the workflow.
// The outbox's namespace stays open: its relay enqueues through this API.
func TestACallersDedupeIdMayNotTakeADurableCalls(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{Token: tsAdmin, Credentials: tsCreds})
	key := func(i orgInput) string { return i.N }
	byInput := jobs.TenantFrom(func(i orgInput) string { return i.T })
	quick := jobs.MustDefine("ts-quick", key, byInput, func(c *jobs.Ctx, i orgInput) (int, error) { return 7, nil })
	parent := jobs.MustDefine("ts-two-phase", key, byInput, func(c *jobs.Ctx, i orgInput) (int, error) {
		if err := jobs.Sleep(c, "later", time.Hour); err != nil {
			return 0, err
		}
		return quick.Call(c, "second", orgInput{N: i.N + "-2", T: i.T})
	})
	b.env.Worker(worker.Config{}, quick, parent)
	res, err := parent.Enqueue(t.Context(), b.env.Engine, orgInput{N: "p", T: "other"})
	if err != nil {
		t.Fatal(err)
	}
	b.env.Await(res.RunID, store.StateSuspended)
	taken := "call:" + res.RunID + "/second"

	for _, tok := range []string{"ts-acme-op", tsAdmin} {
		body := `{"job":"ts-quick","key":"squat-` + tok + `","tenant":"acme","input":{"n":"squat","t":"acme"},"dedupeId":"` + taken + `"}`
		st, _, out := b.call(t, http.MethodPost, "/v1/runs", api.ContentJSON, tok, []byte(body))
		if code, msg := tsRefusal(t, out); st != http.StatusBadRequest || code != jobs.CodeBadRequest || !strings.Contains(msg, `"call:"`) {
			t.Errorf("POST /v1/runs with dedupeId %s as %s: %d %s; want 400 X_BAD_REQUEST naming the namespace", taken, tok, st, out)
		}
		bulk := `{"items":[` + body + `]}`
		st, _, out = b.call(t, http.MethodPost, "/v1/runs/bulk", api.ContentJSON, tok, []byte(bulk))
		var items api.BulkEnqueueResponse
		if err := json.Unmarshal(out, &items); st != http.StatusOK || err != nil || len(items.Items) != 1 {
			t.Fatalf("bulk as %s: %d %s", tok, st, out)
		}
		if e := items.Items[0].Error; e == nil || e.Code != jobs.CodeBadRequest || !strings.Contains(e.Message, `"call:"`) {
			t.Errorf("bulk item with dedupeId %s as %s: %+v; want X_BAD_REQUEST naming the namespace", taken, tok, items.Items[0])
		}
	}
	// The Go client (msgpack) is refused alike.
	c, err := api.NewClient(b.url, "ts-acme-op")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	in, _ := jobs.Encode(orgInput{N: "squat", T: "acme"})
	_, err = c.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "ts-quick", Key: "squat-go", Tenant: "acme", Input: in, DedupeID: taken})
	if !jobs.HasCode(err, jobs.CodeBadRequest) {
		t.Errorf("the Go client's enqueue under %s: %v; want X_BAD_REQUEST", taken, err)
	}
	items, err := c.EnqueueMany(t.Context(), []jobs.EnqueueRequest{{Job: "ts-quick", Key: "squat-go-bulk", Tenant: "acme", Input: in, DedupeID: taken}})
	if err != nil || len(items) != 1 || items[0].Error == nil || !strings.Contains(items[0].Error.Message, `"call:"`) {
		t.Errorf("the Go client's bulk item under %s: %+v %v; want X_BAD_REQUEST naming the namespace", taken, items, err)
	}

	// The run makes its call, which nothing took, and completes.
	b.env.Advance(time.Hour + time.Second)
	if run := b.env.Await(res.RunID, store.StateCompleted, store.StateFailed, store.StateBlocked); run.State != store.StateCompleted {
		t.Errorf("the parent ended %s (%s: %s)", run.State, run.ErrorCode, run.Error)
	}

	// An outbox relay's enqueue (api.Client as its Publisher) carries "outbox:<row>": accepted,
	// and deduped when sent again.
	relay, err := api.NewClient(b.url, "ts-acme-op")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relay.Close)
	req := jobs.EnqueueRequest{Job: "ts-quick", Key: "row-1", Tenant: "acme", Input: in, DedupeID: "outbox:0190aaaa-row-1"}
	first, err := relay.Enqueue(t.Context(), req)
	if err != nil {
		t.Fatalf("a relay's enqueue under an outbox id: %v", err)
	}
	again, err := relay.Enqueue(t.Context(), req)
	if err != nil || again.RunID != first.RunID || !again.Deduped {
		t.Errorf("the relay's resend: %+v %v; want run %s deduped", again, err, first.RunID)
	}
}

// tsFamily is a workflow whose runs belong to two tenants: a parent of tenant parentTenant
// starts a child (StartChild) and enqueues a run (EnqueueFrom, no child link) for acme, then
// sleeps; the child and the enqueued run sleep too.
type tsFamily struct {
	parent *jobs.Job[orgInput, int]
}

func newTSFamily(t *testing.T, b *bundle) tsFamily {
	t.Helper()
	key := func(i orgInput) string { return i.N }
	byInput := jobs.TenantFrom(func(i orgInput) string { return i.T })
	nap := jobs.MustDefine("ts-nap", key, byInput, func(c *jobs.Ctx, i orgInput) (int, error) {
		return 1, jobs.Sleep(c, "nap", 2*time.Hour)
	})
	parent := jobs.MustDefine("ts-fan", key, byInput, func(c *jobs.Ctx, i orgInput) (int, error) {
		if _, err := nap.StartChild(c, "kid", orgInput{N: i.N + "-kid", T: "acme"}); err != nil {
			return 0, err
		}
		if _, err := nap.EnqueueFrom(c, "plain", orgInput{N: i.N + "-plain", T: "acme"}); err != nil {
			return 0, err
		}
		return 1, jobs.Sleep(c, "wait", 3*time.Hour)
	})
	b.env.Worker(worker.Config{}, nap, parent)
	return tsFamily{parent: parent}
}

// start starts a family whose parent is tenant's and returns the three runs' ids.
func (f tsFamily) start(t *testing.T, b *bundle, name, tenant string) (parentID, childID, enqueuedID string) {
	t.Helper()
	res, err := f.parent.Enqueue(t.Context(), b.env.Engine, orgInput{N: name, T: tenant})
	if err != nil {
		t.Fatal(err)
	}
	b.env.Await(res.RunID, store.StateSuspended)
	full, err := b.env.Engine.InspectRun(t.Context(), res.RunID)
	if err != nil || len(full.Children) != 1 {
		t.Fatalf("the parent's children: %+v, %v", full.Children, err)
	}
	childID = full.Children[0].RunID
	for _, s := range full.Steps {
		if s.Kind == "enqueue" {
			var o map[string]string
			_ = json.Unmarshal(s.Output, &o)
			enqueuedID = o["runId"]
		}
	}
	if enqueuedID == "" {
		t.Fatalf("no plain enqueue in %+v", full.Steps)
	}
	b.env.Await(childID, store.StateSuspended)
	b.env.Await(enqueuedID, store.StateSuspended)
	return res.RunID, childID, enqueuedID
}

// tsView is GET /v1/runs/{id} as token.
func tsView(t *testing.T, b *bundle, id, token string) (engine.RunView, []byte) {
	t.Helper()
	st, _, body := b.call(t, http.MethodGet, "/v1/runs/"+id, "", token, nil)
	if st != http.StatusOK {
		t.Fatalf("GET /v1/runs/%s as %s: %d %s", id, token, st, body)
	}
	var v engine.RunView
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	return v, body
}

// tsHistory is GET /v1/runs/{id}/history as token, in both formats: the JSON-lines body, and
// the events it loads back (history.Load), which must be the same as the array's.
func tsHistory(t *testing.T, b *bundle, id, token string) ([]byte, []history.Event) {
	t.Helper()
	st, _, body := b.call(t, http.MethodGet, "/v1/runs/"+id+"/history", "", token, nil)
	if st != http.StatusOK {
		t.Fatalf("history of %s as %s: %d %s", id, token, st, body)
	}
	events, err := history.Load(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the dump of %s as %s does not load: %v", id, token, err)
	}
	st, _, arr := b.call(t, http.MethodGet, "/v1/runs/"+id+"/history?format=json", "", token, nil)
	if st != http.StatusOK {
		t.Fatalf("history?format=json of %s as %s: %d %s", id, token, st, arr)
	}
	var lines []json.RawMessage
	if err := json.Unmarshal(arr, &lines); err != nil || len(lines) != len(events) {
		t.Fatalf("history?format=json of %s: %d lines, %v; the dump has %d events", id, len(lines), err, len(events))
	}
	return append(body, arr...), events
}

// decoded is every payload of events, printed: what a dump's "data" holds once decoded.
func decoded(t *testing.T, events []history.Event) string {
	t.Helper()
	var sb strings.Builder
	for _, e := range events {
		p, err := e.Decode()
		if err != nil {
			t.Fatalf("event %d (%s) does not decode: %v", e.Seq, e.Kind, err)
		}
		fmt.Fprintf(&sb, "%d %s %+v\n", e.Seq, e.Kind, p)
	}
	return sb.String()
}

// A run shows a tenant-scoped credential no id of a run outside its tenant, though the engine
// wrote one into it: the child's and the enqueued run's enqueuedBy ("run:<parent>", in the view
// and in the history's RunStarted, whose stored payload the dump carries in base64 as well), and
// a cancel's reason naming it ("parent <id> was cancelled", which engines wrote into a child
// cancelled with its parent: the cut-short sleep's note in the view, RunCancelled in the history). They read "run" and "(hidden run)". A
// parent of the same tenant stays named, and an unscoped credential sees every id.
func TestATenantIsShownNoIdOfAnotherTenantsRun(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{Token: tsAdmin, Credentials: tsCreds})
	fam := newTSFamily(t, b)
	parentID, childID, enqueuedID := fam.start(t, b, "p", "other")

	for _, id := range []string{childID, enqueuedID} {
		v, body := tsView(t, b, id, "ts-acme-view")
		if strings.Contains(string(body), parentID) || v.EnqueuedBy != "run" || v.Parent != nil {
			t.Errorf("acme's view of %s: enqueuedBy %q, parent %+v, names the other tenant's parent: %v",
				id, v.EnqueuedBy, v.Parent, strings.Contains(string(body), parentID))
		}
		raw, events := tsHistory(t, b, id, "ts-acme-view")
		if strings.Contains(string(raw), parentID) {
			t.Errorf("acme's history of %s names the other tenant's parent %s:\n%s", id, parentID, raw)
		}
		if d := decoded(t, events); strings.Contains(d, parentID) {
			t.Errorf("acme's history of %s holds the other tenant's parent %s in its data:\n%s", id, parentID, d)
		}
		if p, _ := events[0].Decode(); p.(history.RunStarted).EnqueuedBy != "run" {
			t.Errorf("acme's history of %s: RunStarted %+v; want enqueuedBy \"run\"", id, p)
		}
		// The admin sees the run as it is.
		if v, _ := tsView(t, b, id, tsAdmin); v.EnqueuedBy != "run:"+parentID {
			t.Errorf("the admin's view of %s: enqueuedBy %q; want run:%s", id, v.EnqueuedBy, parentID)
		}
		if _, events := tsHistory(t, b, id, tsAdmin); !strings.Contains(decoded(t, events), parentID) {
			t.Errorf("the admin's history of %s does not name its parent", id)
		}
	}

	// A parent of acme's own stays named.
	ownParent, _, ownEnqueued := fam.start(t, b, "q", "acme")
	if v, _ := tsView(t, b, ownEnqueued, "ts-acme-view"); v.EnqueuedBy != "run:"+ownParent {
		t.Errorf("acme's view of a run its own run enqueued: enqueuedBy %q; want run:%s", v.EnqueuedBy, ownParent)
	}
	if _, events := tsHistory(t, b, ownEnqueued, "ts-acme-view"); !strings.Contains(decoded(t, events), "run:"+ownParent) {
		t.Errorf("acme's history of a run its own run enqueued does not name that run")
	}

	// A cancel whose reason names the other tenant's parent: the reason engines wrote a child
	// cancelled with its parent before they left another tenant's parent out of it (histories
	// keep it), or an operator's.
	if _, err := b.env.Engine.Cancel(t.Context(), childID, "parent "+parentID+" was cancelled"); err != nil {
		t.Fatal(err)
	}
	b.env.Await(childID, store.StateCancelled)
	napNote := func(v engine.RunView) string {
		for _, s := range v.Steps {
			if s.Name == "nap" {
				return s.Note
			}
		}
		return ""
	}
	if v, _ := tsView(t, b, childID, tsAdmin); !strings.Contains(napNote(v), parentID) {
		t.Fatalf("the admin's view of the cancelled child: the sleep's note %q does not name the parent: nothing to hide", napNote(v))
	}
	v, body := tsView(t, b, childID, "ts-acme-view")
	if strings.Contains(string(body), parentID) || !strings.Contains(napNote(v), "(hidden run)") {
		t.Errorf("acme's view of its cancelled child: the cut-short sleep's note %q, names the parent: %v", napNote(v), strings.Contains(string(body), parentID))
	}
	raw, events := tsHistory(t, b, childID, "ts-acme-view")
	if d := decoded(t, events); strings.Contains(string(raw), parentID) || strings.Contains(d, parentID) || !strings.Contains(d, "(hidden run)") {
		t.Errorf("acme's history of its cancelled child names the other tenant's parent %s:\n%s", parentID, d)
	}
	st, _, list := b.call(t, http.MethodGet, "/v1/runs?state=cancelled", "", "ts-acme-view", nil)
	if st != http.StatusOK || strings.Contains(string(list), parentID) || !strings.Contains(string(list), childID) {
		t.Errorf("acme's listing of its cancelled runs: %d, names the parent: %v\n%s", st, strings.Contains(string(list), parentID), list)
	}
}

// A tenant-scoped credential is told a run is not found in one text, whether the run is another
// tenant's or none at all, on every store: the stores word their own not-found differently
// (SQLite `run "<id>" not found`, memory `run <id>`), and passing theirs on beside authorize's
// told the two cases apart on SQLite.
func TestARunNotFoundReadsTheSameWhoseverItIs(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			opts := testenv.Options{}
			if backend == "sqlite" {
				opts.Store = testenv.OpenSQLite(t)
			}
			b := setupEnv(t, opts, api.Config{Token: tsAdmin, Credentials: tsCreds})
			theirs, err := b.env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "j", Queue: "q", Key: "k", Tenant: "globex"})
			if err != nil {
				t.Fatal(err)
			}
			missing := "01890000-0000-7000-8000-000000000000"
			for _, suffix := range []string{"", "/history", "/result?wait=0s"} {
				_, _, a := b.call(t, http.MethodGet, "/v1/runs/"+theirs.RunID+suffix, "", "ts-acme-view", nil)
				_, _, m := b.call(t, http.MethodGet, "/v1/runs/"+missing+suffix, "", "ts-acme-view", nil)
				ca, ma := tsRefusal(t, a)
				cm, mm := tsRefusal(t, m)
				ma, mm = strings.ReplaceAll(ma, theirs.RunID, "ID"), strings.ReplaceAll(mm, missing, "ID")
				if ca != jobs.CodeRunNotFound || cm != jobs.CodeRunNotFound || ma != mm || ma != `run "ID" not found` {
					t.Errorf("%s: another tenant's run answers %s %q, a missing one %s %q; want both X_RUN_NOT_FOUND %q",
						suffix, ca, ma, cm, mm, `run "ID" not found`)
				}
			}
		})
	}
}

// authorize checks the run id the router serves the handler (r.PathValue("id")), not one it
// reads from the path itself: it read the already unescaped r.URL.Path and unescaped its segment
// again, so it checked another id than the handler was served ("%252F": "/" checked, "%2F"
// served) or, when that second unescape failed ("%25zz"), none at all.
func TestTheTenantCheckReadsTheIdTheRouterServes(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{Token: tsAdmin, Credentials: tsCreds})
	own, err := b.env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "j", Queue: "q", Key: "own", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := b.env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "j", Queue: "q", Key: "theirs", Tenant: "globex"})
	if err != nil {
		t.Fatal(err)
	}
	for path, served := range map[string]string{
		"/v1/runs/%25zz":                              "%zz",
		"/v1/runs/%25zz/history":                      "%zz",
		"/v1/runs/%252F":                              "%2F",
		"/v1/runs/%252F" + theirs.RunID:               "%2F" + theirs.RunID,
		"/v1/runs/%2F" + theirs.RunID:                 "/" + theirs.RunID,
		"/v1/runs/" + theirs.RunID + "%2Fhistory":     theirs.RunID + "/history",
		"/v1/runs/%30" + theirs.RunID[1:]:             theirs.RunID, // an escaped digit: the same id
		"/v1/runs/%30" + theirs.RunID[1:] + "/result": theirs.RunID,
	} {
		st, _, body := b.call(t, http.MethodGet, path, "", "ts-acme-view", nil)
		code, msg := tsRefusal(t, body)
		if want := fmt.Sprintf("run %q not found", served); st != http.StatusNotFound || code != jobs.CodeRunNotFound || msg != want {
			t.Errorf("GET %s as acme: %d %s %q; want 404 X_RUN_NOT_FOUND %q", path, st, code, msg, want)
		}
	}
	// acme's own run, its id's first digit escaped: the router serves the run, and so does the check.
	if st, _, body := b.call(t, http.MethodGet, "/v1/runs/%30"+own.RunID[1:], "", "ts-acme-view", nil); st != http.StatusOK || !strings.Contains(string(body), own.RunID) {
		t.Errorf("GET acme's own run by an escaped path: %d %s", st, body)
	}
}

// A tenant-scoped credential may not read the manifest (it spans every tenant), so an enqueue's
// refusal does not read it to it either: the queues a job is declared on (X_JOB_UNDECLARED) and
// the keyed limit and input field a job counts by (X_FLOW_KEY) are left out of the message,
// whose code stays. An unscoped credential is told everything, as before.
func TestATenantsEnqueueRefusalReadsNoManifest(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, testenv.Options{RequireDeclared: true}, api.Config{Token: tsAdmin, Credentials: tsCreds})
	b.remoteWorker(t, testenv.Untyped("ts-payroll", "hr-private"))
	key := func(i orgInput) string { return i.N }
	byInput := jobs.TenantFrom(func(i orgInput) string { return i.T })
	limited := jobs.MustDefine("ts-limited", key, byInput, func(c *jobs.Ctx, i orgInput) (int, error) { return 1, nil },
		jobs.RateBy(jobs.ByInput("region"), 1, time.Hour))
	b.env.Worker(worker.Config{}, limited)

	cases := []struct {
		body   string
		code   jobs.Code
		secret string // what the manifest says, which only the admin is told
	}{
		{`{"job":"ts-payroll","queue":"nope","key":"k","tenant":"acme"}`, jobs.CodeJobUndeclared, "hr-private"},
		{`{"job":"ts-limited","key":"k","tenant":"acme","input":{"n":"k","t":"acme"}}`, jobs.CodeFlowKey, "region"},
	}
	for _, c := range cases {
		st, _, out := b.call(t, http.MethodPost, "/v1/runs", api.ContentJSON, "ts-acme-op", []byte(c.body))
		if code, _ := tsRefusal(t, out); code != c.code || strings.Contains(string(out), c.secret) {
			t.Errorf("acme's enqueue %s: %d %s; want %s without %q", c.body, st, out, c.code, c.secret)
		}
		_, _, out = b.call(t, http.MethodPost, "/v1/runs/bulk", api.ContentJSON, "ts-acme-op", []byte(`{"items":[`+c.body+`]}`))
		var items api.BulkEnqueueResponse
		if err := json.Unmarshal(out, &items); err != nil || len(items.Items) != 1 || items.Items[0].Error == nil ||
			items.Items[0].Error.Code != c.code || strings.Contains(string(out), c.secret) {
			t.Errorf("acme's bulk item %s: %s; want %s without %q", c.body, out, c.code, c.secret)
		}
		admin := strings.Replace(c.body, `"key":"k"`, `"key":"k-admin"`, 1)
		_, _, out = b.call(t, http.MethodPost, "/v1/runs", api.ContentJSON, tsAdmin, []byte(admin))
		if code, msg := tsRefusal(t, out); code != c.code || !strings.Contains(msg, c.secret) {
			t.Errorf("the admin's enqueue %s: %s; want %s naming %q", admin, out, c.code, c.secret)
		}
	}
}
