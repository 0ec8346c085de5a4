package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/examples"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bundle is an engine on a memory store behind the API, served by httptest, and a client of it.
type bundle struct {
	env    *testenv.Env
	srv    *api.Server
	url    string
	client *api.Client
}

func setup(t *testing.T, cfg api.Config, opts ...api.ClientOption) *bundle {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	cfg.Engine = env.Engine
	if cfg.Logger == nil {
		cfg.Logger = env.Logger
	}
	srv, err := api.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return serveBundle(t, env, srv, cfg.Token, opts...)
}

// serveBundle serves srv with httptest and returns it with a client holding token.
func serveBundle(t *testing.T, env *testenv.Env, srv *api.Server, token string, opts ...api.ClientOption) *bundle {
	t.Helper()
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	// Cleanups run last-registered first: long-polls end before httptest waits for them.
	t.Cleanup(srv.Drain)
	c, err := api.NewClient(ts.URL, token, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &bundle{env: env, srv: srv, url: ts.URL, client: c}
}

// remoteWorker starts a worker that reaches the engine only through the HTTP client.
func (b *bundle) remoteWorker(t *testing.T, defs ...jobs.Definition) *worker.Worker {
	t.Helper()
	reg, err := jobs.NewRegistry(defs...)
	if err != nil {
		t.Fatal(err)
	}
	w := startWorker(t, worker.Config{Frontend: b.client, Registry: reg, Clock: b.env.Clock, Logger: b.env.Logger,
		PollWait: time.Second})
	return w
}

// call sends a raw request and returns the status and body.
func (b *bundle) call(t *testing.T, method, path, contentType, token string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, b.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
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

// jsonCode reads the code of a JSON refusal.
func jsonCode(t *testing.T, body []byte) jobs.Code {
	t.Helper()
	var eb api.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error == nil {
		t.Fatalf("not a JSON refusal: %q", body)
	}
	if eb.Error.Message == "" {
		t.Fatalf("refusal without a message: %q", body)
	}
	return eb.Error.Code
}

func TestWorkerRunsUnchangedOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{Token: "s3cret"})
	b.remoteWorker(t, examples.Onboarding)
	ctx := context.Background()

	// A typed enqueue through the client: the input travels as msgpack, byte for byte.
	res, err := examples.Onboarding.Enqueue(ctx, b.client, examples.OnboardingInput{OrgID: "acme", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := examples.Onboarding.Enqueue(ctx, b.client, examples.OnboardingInput{OrgID: "acme", Name: "Acme"})
	if err != nil || !again.Deduped || again.RunID != res.RunID {
		t.Fatalf("second enqueue = %+v, %v; want the live run, deduped", again, err)
	}
	b.env.Await(res.RunID, store.StateSuspended)
	b.env.Advance(examples.DefaultOnboardingSleep)
	waitFor(t, func() bool {
		v, err := b.client.GetRun(ctx, res.RunID)
		return err == nil && v.State == store.StateSuspended && len(v.Steps) == 4 && v.Steps[3].Kind == "wait"
	})
	pub, err := b.client.Publish(ctx, "plan.chosen", examples.PlanChosen{OrgID: "acme", Plan: "pro"})
	if err != nil || pub.Delivered != 1 {
		t.Fatalf("publish = %+v, %v; want delivered to the one waiting run", pub, err)
	}
	run := b.env.Await(res.RunID, store.StateCompleted)
	out, err := examples.Onboarding.Result(run.Result)
	if err != nil || out.Plan != "pro" || out.Welcome != "Welcome to the pro plan, Acme!" {
		t.Fatalf("result = %+v, %v", out, err)
	}

	view, err := b.client.GetRun(ctx, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range view.Steps {
		names = append(names, s.Kind+":"+s.Name+":"+s.Status)
	}
	want := "step:provision:completed step:seed:completed sleep:look-around:woke wait:plan:received step:welcome:completed"
	if strings.Join(names, " ") != want {
		t.Fatalf("trace = %v\nwant    %s", names, want)
	}
}

// TestRefusalsKeepTheirCodes holds the client to the promise that jobs.HasCode answers the same
// remote as in-process: each refusal is provoked on the engine directly and through HTTP.
func TestRefusalsKeepTheirCodes(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	ctx := context.Background()
	eng := b.env.Engine

	done, err := eng.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Key: "k", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Cancel(ctx, done.RunID, "setup"); err != nil {
		t.Fatal(err)
	}
	ready, err := eng.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Key: "k2", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		code   jobs.Code
		local  func() error
		remote func() error
	}{
		{"unknown run", jobs.CodeRunNotFound,
			func() error { _, err := eng.InspectRun(ctx, "nope"); return err },
			func() error { _, err := b.client.GetRun(ctx, "nope"); return err }},
		{"cancel a finished run", jobs.CodeJobNotCancellable,
			func() error { _, err := eng.Cancel(ctx, done.RunID, ""); return err },
			func() error { _, err := b.client.Cancel(ctx, done.RunID, ""); return err }},
		{"retry a live run", jobs.CodeJobNotRetryable,
			func() error { _, err := eng.Retry(ctx, engine.RetryRequest{RunID: ready.RunID}); return err },
			func() error { _, err := b.client.Retry(ctx, engine.RetryRequest{RunID: ready.RunID}); return err }},
		{"enqueue without a key", jobs.CodeJobIdempotencyRequired,
			func() error { _, err := eng.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", NoTenant: true}); return err },
			func() error {
				_, err := b.client.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", NoTenant: true})
				return err
			}},
		{"enqueue without a tenant", jobs.CodeJobTenantRequired,
			func() error { _, err := eng.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Key: "k"}); return err },
			func() error { _, err := b.client.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Key: "k"}); return err }},
		{"record without the claim's lease token", jobs.CodeLeaseInvalid,
			func() error { _, err := eng.Record(ctx, staleRecord(ready.RunID)); return err },
			func() error { _, err := b.client.Record(ctx, staleRecord(ready.RunID)); return err }},
		{"history of an unknown run", jobs.CodeRunNotFound,
			func() error { _, err := eng.History(ctx, "nope", 0); return err },
			func() error { _, err := b.client.History(ctx, "nope", 0); return err }},
		{"an event without a name", jobs.CodeBadRequest,
			func() error { _, err := eng.Publish(ctx, "", nil); return err },
			func() error { _, err := b.client.Publish(ctx, "", nil); return err }},
	}
	for _, c := range cases {
		if err := c.local(); !jobs.HasCode(err, c.code) {
			t.Fatalf("%s in-process: %v, want %s", c.name, err, c.code)
		}
		err := c.remote()
		if !jobs.HasCode(err, c.code) {
			t.Fatalf("%s over HTTP: %v, want %s", c.name, err, c.code)
		}
	}
}

func staleRecord(runID string) frontend.RecordRequest {
	return frontend.RecordRequest{RunID: runID, Fence: 99, WorkerID: "w",
		Commands: []frontend.Command{{Kind: frontend.CmdStep, Name: "s"}}}
}

func TestAdminAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	post := func(path, body string) (int, []byte) {
		st, _, out := b.call(t, http.MethodPost, path, api.ContentJSON, "", []byte(body))
		return st, out
	}
	get := func(path string) (int, []byte) {
		st, _, out := b.call(t, http.MethodGet, path, "", "", nil)
		return st, out
	}

	t.Run("untyped enqueue must name key and tenant", func(t *testing.T) {
		for body, code := range map[string]jobs.Code{
			`{"job":"onboard-org","input":{"orgId":"a"},"tenant":"a"}`:        jobs.CodeJobIdempotencyRequired,
			`{"job":"onboard-org","input":{"orgId":"a"},"key":"k"}`:           jobs.CodeJobTenantRequired,
			`{"job":"onboard-org","key":"k","tenant":"a","noTenant":true}`:    jobs.CodeBadRequest,
			`{"input":{},"key":"k","tenant":"a"}`:                             jobs.CodeBadRequest,
			`{"job":"onboard-org","key":"k","tenant":"a","delay":"-1s"}`:      jobs.CodeBadRequest,
			`{"job":"onboard-org","key":"k","tenant":"a","delay":"soon"}`:     jobs.CodeBadRequest,
			`{"job":"onboard-org","key":"k","tenant":"a","input":{"orgId":}}`: jobs.CodeBadRequest,
			`{"job":"onboard-org","key":"k","tenant":"a","urgency":1}`:        jobs.CodeBadRequest,
			`{"job":"onboard-org","key":"k","tenant":"a","priority":101}`:     jobs.CodeBadRequest,
			`{"job":"onboard-org","key":"k\u0000","tenant":"a"}`:              jobs.CodeBadRequest,
			`{"job":"onboard-org","key":"k","tenant":"a"} {}`:                 jobs.CodeBadRequest,
			`[1,2]`: jobs.CodeBadRequest,
		} {
			st, out := post("/v1/runs", body)
			if st != http.StatusBadRequest || jsonCode(t, out) != code {
				t.Errorf("POST /v1/runs %s = %d %s; want 400 %s", body, st, out, code)
			}
		}
	})

	var runID string
	t.Run("enqueue, then the same key again", func(t *testing.T) {
		body := `{"job":"onboard-org","input":{"orgId":"acme"},"key":"onboard:acme","tenant":"acme","queue":"onboarding","enqueuedBy":"ops"}`
		st, out := post("/v1/runs", body)
		var res jobs.EnqueueResult
		if st != http.StatusCreated || json.Unmarshal(out, &res) != nil || res.RunID == "" || res.Deduped {
			t.Fatalf("enqueue = %d %s", st, out)
		}
		runID = res.RunID
		st, out = post("/v1/runs", body)
		var again jobs.EnqueueResult
		if st != http.StatusOK || json.Unmarshal(out, &again) != nil || again.RunID != runID || !again.Deduped {
			t.Fatalf("second enqueue = %d %s; want 200 with the same run, deduped", st, out)
		}
		// The JSON input was stored as msgpack that decodes into the typed input.
		run, err := b.env.Engine.GetRun(context.Background(), runID)
		if err != nil {
			t.Fatal(err)
		}
		var in examples.OnboardingInput
		if err := jobs.Decode(run.Input, &in); err != nil || in.OrgID != "acme" || run.EnqueuedBy != "ops" {
			t.Fatalf("stored input %+v (%v), enqueuedBy %q", in, err, run.EnqueuedBy)
		}
	})

	t.Run("inspect", func(t *testing.T) {
		st, out := get("/v1/runs/" + runID)
		var v engine.RunView
		if st != http.StatusOK || json.Unmarshal(out, &v) != nil || v.ID != runID || v.State != store.StateReady || string(v.Input) != `{"orgId":"acme"}` {
			t.Fatalf("GET run = %d %s", st, out)
		}
		if st, out := get("/v1/runs/no-such-run"); st != http.StatusNotFound || jsonCode(t, out) != jobs.CodeRunNotFound {
			t.Fatalf("GET unknown run = %d %s", st, out)
		}
		st, out = get("/v1/queues")
		var ql api.QueueList
		if st != http.StatusOK || json.Unmarshal(out, &ql) != nil || len(ql.Queues) != 1 || ql.Queues[0].Counts[store.StateReady] != 1 {
			t.Fatalf("GET queues = %d %s", st, out)
		}
		st, out = get("/v1/codes")
		var cl api.CodeList
		if st != http.StatusOK || json.Unmarshal(out, &cl) != nil || len(cl.Codes) != len(jobs.Codes()) {
			t.Fatalf("GET codes = %d %s", st, out)
		}
	})

	t.Run("history in both formats", func(t *testing.T) {
		st, out := get("/v1/runs/" + runID + "/history")
		evs, err := history.Load(bytes.NewReader(out))
		if st != http.StatusOK || err != nil || len(evs) != 1 || evs[0].Kind != history.KindRunStarted {
			t.Fatalf("jsonl history = %d %s (%v)", st, out, err)
		}
		st, out = get("/v1/runs/" + runID + "/history?format=json")
		var arr []map[string]any
		if st != http.StatusOK || json.Unmarshal(out, &arr) != nil || len(arr) != 1 || arr[0]["kind"] != "RunStarted" {
			t.Fatalf("json history = %d %s", st, out)
		}
		if st, out := get("/v1/runs/" + runID + "/history?format=xml"); st != http.StatusBadRequest || jsonCode(t, out) != jobs.CodeBadRequest {
			t.Fatalf("xml history = %d %s", st, out)
		}
		if st, out := get("/v1/runs/nope/history"); st != http.StatusNotFound || jsonCode(t, out) != jobs.CodeRunNotFound {
			t.Fatalf("history of unknown run = %d %s", st, out)
		}
	})

	t.Run("cancel, then cancel again", func(t *testing.T) {
		st, out := post("/v1/runs/"+runID+"/cancel", `{"reason":"testing"}`)
		var s engine.RunSummary
		if st != http.StatusOK || json.Unmarshal(out, &s) != nil || s.State != store.StateCancelled {
			t.Fatalf("cancel = %d %s", st, out)
		}
		if st, out := post("/v1/runs/"+runID+"/cancel", ``); st != http.StatusConflict || jsonCode(t, out) != jobs.CodeJobNotCancellable {
			t.Fatalf("second cancel = %d %s", st, out)
		}
		if st, out := post("/v1/runs/"+runID+"/retry", `{"by":"ops"}`); st != http.StatusConflict || jsonCode(t, out) != jobs.CodeJobNotRetryable {
			t.Fatalf("retry of a cancelled run = %d %s", st, out)
		}
	})

	t.Run("publish", func(t *testing.T) {
		st, out := post("/v1/events/plan.chosen", `{"orgId":"acme","plan":"pro"}`)
		var p struct {
			EventID   string `json:"eventId"`
			Delivered int    `json:"delivered"`
		}
		if st != http.StatusOK || json.Unmarshal(out, &p) != nil || p.EventID == "" {
			t.Fatalf("publish = %d %s", st, out)
		}
		if st, out := post("/v1/events/plan.chosen", `{"orgId":`); st != http.StatusBadRequest || jsonCode(t, out) != jobs.CodeBadRequest {
			t.Fatalf("publish of bad JSON = %d %s", st, out)
		}
	})

	t.Run("routes", func(t *testing.T) {
		if st, out := get("/v1/nothing"); st != http.StatusNotFound || jsonCode(t, out) != jobs.CodeRouteNotFound {
			t.Fatalf("unknown route = %d %s", st, out)
		}
	})
}

func TestListRunsPages(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	ctx := context.Background()
	var ids []string
	for i := range 7 {
		res, err := b.env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Key: string(rune('a' + i)), Tenant: "t", Queue: "q"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.RunID)
		b.env.Fake().Advance(time.Millisecond) // ids are time-ordered by the millisecond
	}
	var seen []string
	p := store.ListParams{Queue: "q", Limit: 3}
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("the cursor does not end")
		}
		pg, err := b.client.ListRuns(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range pg.Runs {
			seen = append(seen, r.ID)
		}
		if pg.Next == "" {
			break
		}
		p.Before = pg.Next
	}
	if len(seen) != 7 {
		t.Fatalf("paged through %d runs, want 7", len(seen))
	}
	for i, id := range seen {
		if id != ids[len(ids)-1-i] {
			t.Fatalf("page order: got %v, want newest first %v", seen, ids)
		}
	}
	st, _, out := b.call(t, http.MethodGet, "/v1/runs?state=bogus", "", "", nil)
	if st != http.StatusBadRequest || jsonCode(t, out) != jobs.CodeBadRequest {
		t.Fatalf("bogus state = %d %s", st, out)
	}
	st, _, out = b.call(t, http.MethodGet, "/v1/runs?limit=100000", "", "", nil)
	if st != http.StatusBadRequest || jsonCode(t, out) != jobs.CodeBadRequest {
		t.Fatalf("huge limit = %d %s", st, out)
	}
	dl, err := b.client.DeadLetters(ctx, store.ListParams{})
	if err != nil || len(dl.Runs) != 0 || dl.Runs == nil {
		t.Fatalf("dead letters = %+v, %v; want an empty list", dl, err)
	}
}

func TestTokenIsRequired(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{Token: "right"})
	for _, tc := range []struct{ token, path, method, ct string }{
		{"", "/v1/runs", http.MethodGet, ""},
		{"wrong", "/v1/runs", http.MethodGet, ""},
		{"righ", "/v1/queues", http.MethodGet, ""},
		{"", "/metrics", http.MethodGet, ""},
		{"", "/v1/worker/poll", http.MethodPost, api.ContentMsgpack},
	} {
		st, h, out := b.call(t, tc.method, tc.path, tc.ct, tc.token, nil)
		if st != http.StatusUnauthorized {
			t.Fatalf("%s %s with token %q = %d, want 401", tc.method, tc.path, tc.token, st)
		}
		if tc.ct == api.ContentMsgpack {
			var e jobs.Error
			if h.Get("Content-Type") != api.ContentMsgpack || jobs.Decode(out, &e) != nil || e.Code != jobs.CodeUnauthorized {
				t.Fatalf("worker refusal = %q %q, want msgpack X_UNAUTHORIZED", h.Get("Content-Type"), out)
			}
		} else if jsonCode(t, out) != jobs.CodeUnauthorized {
			t.Fatalf("refusal = %s", out)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if st, _, out := b.call(t, http.MethodGet, path, "", "", nil); st != http.StatusOK {
			t.Fatalf("%s without a token = %d %s; probes need none", path, st, out)
		}
	}
	if st, _, _ := b.call(t, http.MethodGet, "/v1/runs", "", "right", nil); st != http.StatusOK {
		t.Fatalf("with the token = %d", st)
	}
	wrong, err := api.NewClient(b.url, "wrong")
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	if _, err := wrong.Poll(context.Background(), frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}}); !jobs.HasCode(err, jobs.CodeUnauthorized) {
		t.Fatalf("poll with a wrong token: %v", err)
	}
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{MaxBody: 1024})
	big := `{"job":"j","key":"k","noTenant":true,"input":"` + strings.Repeat("x", 2000) + `"}`
	st, _, out := b.call(t, http.MethodPost, "/v1/runs", api.ContentJSON, "", []byte(big))
	if st != http.StatusRequestEntityTooLarge || jsonCode(t, out) != jobs.CodePayloadTooLarge {
		t.Fatalf("oversized body = %d %s", st, out)
	}
	_, err := b.client.Record(context.Background(), frontend.RecordRequest{RunID: "r", Fence: 1,
		Commands: []frontend.Command{{Kind: frontend.CmdStep, Name: "s", Output: make([]byte, 4096)}}})
	if !jobs.HasCode(err, jobs.CodePayloadTooLarge) {
		t.Fatalf("oversized record: %v", err)
	}
}

func TestLongPoll(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{MaxPollWait: 300 * time.Millisecond})
	ctx := context.Background()
	testenv.Declare(t, b.client, "w", testenv.Untyped("j", "q"))
	poll := func(ctx context.Context, wait time.Duration) ([]frontend.Task, time.Duration, error) {
		start := time.Now()
		tasks, err := b.client.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 5, Wait: wait})
		return tasks, time.Since(start), err
	}

	// The server caps the wait, whatever the worker asks.
	tasks, took, err := poll(ctx, time.Hour)
	if err != nil || len(tasks) != 0 || took < 250*time.Millisecond || took > 5*time.Second {
		t.Fatalf("idle poll = %d tasks after %s, %v; want none after the 300ms cap", len(tasks), took, err)
	}

	// A run enqueued during the wait ends it at once.
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = b.env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Key: "k", NoTenant: true, Queue: "q"})
	}()
	tasks, _, err = poll(ctx, 250*time.Millisecond)
	if err != nil || len(tasks) != 1 || tasks[0].Fence == 0 || tasks[0].Lease <= 0 {
		t.Fatalf("poll = %+v, %v; want the run enqueued during the wait", tasks, err)
	}

	// A caller that gives up gets its cancellation back, not an outage code.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, err := poll(cctx, 250*time.Millisecond); err != context.DeadlineExceeded {
		t.Fatalf("cancelled poll: %v, want context.DeadlineExceeded", err)
	}

	// Draining ends the polls in progress, and refuses new ones with X_DRAINING.
	done := make(chan error, 1)
	go func() {
		_, _, err := poll(ctx, 250*time.Millisecond)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	b.srv.Drain()
	if err := <-done; err != nil && !jobs.HasCode(err, jobs.CodeDraining) {
		t.Fatalf("poll during drain: %v", err)
	}
	if _, _, err := poll(ctx, 0); !jobs.HasCode(err, jobs.CodeDraining) {
		t.Fatalf("poll after drain: %v, want X_DRAINING", err)
	}
	if st, _, out := b.call(t, http.MethodGet, "/readyz", "", "", nil); st != http.StatusServiceUnavailable || jsonCode(t, out) != jobs.CodeDraining {
		t.Fatalf("readyz while draining = %d %s", st, out)
	}
}

// TestPollClaimedAfterTheClientLeftIsHandedBack: a run claimed for a worker that hung up is
// released at once, not left invisible until its lease lapses.
func TestPollClaimedAfterTheClientLeftIsHandedBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reqCtx, hangUp := context.WithCancel(ctx)
	// The client hangs up exactly between the claim and the answer.
	st := &hangUpAfterClaim{Store: memory.New(), hangUp: hangUp}
	env := testenv.Start(t, testenv.Options{Store: st})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Key: "k", NoTenant: true, Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Declare(t, env.Engine, "w", testenv.Untyped("j", "q"))
	body, err := msgpack.Marshal(frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequestWithContext(reqCtx, http.MethodPost, "http://127.0.0.1/v1/worker/poll", bytes.NewReader(body))
	req.RemoteAddr = "127.0.0.1:1" // a loopback client: the server has no token
	req.Header.Set("Content-Type", api.ContentMsgpack)
	srv.ServeHTTP(httptest.NewRecorder(), req)
	run, err := env.Engine.GetRun(ctx, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Fence != 1 || run.State != store.StateReady {
		t.Fatalf("fence %d, state %s; want the run claimed (fence 1) and handed back (ready)", run.Fence, run.State)
	}
}

type hangUpAfterClaim struct {
	store.Store
	hangUp context.CancelFunc
}

func (s *hangUpAfterClaim) RunClaim(ctx context.Context, p store.ClaimParams) ([]store.Run, error) {
	runs, err := s.Store.RunClaim(context.WithoutCancel(ctx), p)
	if len(runs) > 0 {
		s.hangUp()
	}
	return runs, err
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	if err := b.client.Ready(context.Background()); err != nil {
		t.Fatalf("ready: %v", err)
	}
	if st, _, _ := b.call(t, http.MethodGet, "/healthz", "", "", nil); st != http.StatusOK {
		t.Fatalf("healthz = %d", st)
	}

	down := testenv.Start(t, testenv.Options{Store: downStore{memory.New()}})
	srv, err := api.NewServer(api.Config{Engine: down.Engine, Logger: down.Logger})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || jsonCode(t, rec.Body.Bytes()) != jobs.CodeStoreUnavailable {
		t.Fatalf("readyz over a store that is down = %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/healthz", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("healthz over a store that is down = %d; liveness must not depend on the store", rec.Code)
	}
}

// downStore is a store that cannot be reached.
type downStore struct{ store.Store }

func (downStore) RunGet(context.Context, string) (store.Run, error) {
	return store.Run{}, jobs.Errorf(jobs.CodeStoreUnavailable, "connection refused")
}

func (downStore) QueueStats(context.Context) ([]store.QueueStats, error) {
	return nil, jobs.Errorf(jobs.CodeStoreUnavailable, "connection refused")
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	ctx := context.Background()
	// A worker declares the queue: the gauges name only declared queues.
	testenv.Declare(t, b.env.Engine, "w", testenv.Untyped("j", "payments"))
	for _, k := range []string{"a", "b"} {
		if _, err := b.env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Key: k, NoTenant: true, Queue: "payments"}); err != nil {
			t.Fatal(err)
		}
	}
	b.env.Fake().Advance(90 * time.Second)
	st, _, out := b.call(t, http.MethodGet, "/metrics", "", "", nil)
	if st != http.StatusOK {
		t.Fatalf("metrics = %d %s", st, out)
	}
	text := string(out)
	for _, want := range []string{
		`queue_depth{queue="payments"} 2`,
		`queue_oldest_ready_seconds{queue="payments"} 90`,
		`queue_dead_jobs{queue="payments"} 0`,
		`queue_runs{queue="payments",state="ready"} 2`,
		`queue_stats_up 1`,
		`go_goroutines `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}

	down := testenv.Start(t, testenv.Options{Store: downStore{memory.New()}})
	srv, err := api.NewServer(api.Config{Engine: down.Engine, Logger: down.Logger})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	metricsReq := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/metrics", nil)
	metricsReq.RemoteAddr = "127.0.0.1:1" // a loopback client: the server has no token
	srv.ServeHTTP(rec, metricsReq)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "queue_stats_up 0") {
		t.Fatalf("metrics over a store that is down = %d, want 200 with queue_stats_up 0:\n%s", rec.Code, rec.Body)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	waitUntil(t, func() error {
		if cond() {
			return nil
		}
		return errors.New("condition not met")
	})
}

// waitUntil polls check for up to 20s and fails the test with check's last error, which says
// what was still missing.
func waitUntil(t *testing.T, check func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBrowserRequestsAreRefused: an engine on loopback is reachable by any web page its operator
// opens; what only a page could send is refused.
func TestBrowserRequestsAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	send := func(method, path, host, origin, contentType, body string) (int, jobs.Code) {
		req, err := http.NewRequest(method, b.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		if res.StatusCode < 300 {
			return res.StatusCode, ""
		}
		return res.StatusCode, jsonCode(t, out)
	}
	enqueue := `{"job":"j","key":"k","noTenant":true}`
	for _, c := range []struct {
		name             string
		host, origin, ct string
		wantStatus       int
		wantCode         jobs.Code
	}{
		{"a form post from another site", "", "https://evil.example", "application/x-www-form-urlencoded", 401, jobs.CodeUnauthorized},
		{"JSON from another site", "", "https://evil.example", api.ContentJSON, 401, jobs.CodeUnauthorized},
		{"a DNS-rebinding page, by name", "evil.example:7233", "http://evil.example:7233", api.ContentJSON, 401, jobs.CodeUnauthorized},
		{"text/plain, which needs no preflight", "", "", "text/plain", 400, jobs.CodeBadRequest},
		{"no content type", "", "", "", 400, jobs.CodeBadRequest},
		{"the CLI: JSON by address", "", "", api.ContentJSON, 201, ""},
	} {
		st, code := send(http.MethodPost, "/v1/runs", c.host, c.origin, c.ct, enqueue)
		if st != c.wantStatus || code != c.wantCode {
			t.Errorf("%s: %d %s, want %d %s", c.name, st, code, c.wantStatus, c.wantCode)
		}
	}
	// Same-origin reads (a page served by the engine itself) and localhost by name are fine.
	if st, code := send(http.MethodGet, "/v1/queues", "localhost:7233", "http://localhost:7233", "", ""); st != 200 {
		t.Errorf("same-origin read: %d %s", st, code)
	}
	// With a token, a host name is fine: the token is what a rebinding page cannot have.
	tb := setup(t, api.Config{Token: "tk"})
	req, _ := http.NewRequest(http.MethodGet, tb.url+"/v1/queues", nil)
	req.Host = "engine.internal:7233"
	req.Header.Set("Authorization", "Bearer tk")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("by name with the token: %d", res.StatusCode)
	}
}

// TestLongPollEndsWhenTheClientLeaves: the server stops waiting for a worker that hung up.
func TestLongPollEndsWhenTheClientLeaves(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	testenv.Declare(t, b.client, "w", testenv.Untyped("j", "q"))
	body, err := msgpack.Marshal(frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Wait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, hangUp := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1/v1/worker/poll", bytes.NewReader(body))
	req.RemoteAddr = "127.0.0.1:1" // a loopback client: the server has no token
	req.Header.Set("Content-Type", api.ContentMsgpack)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.srv.ServeHTTP(httptest.NewRecorder(), req)
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("the poll returned before its wait with nothing to claim")
	default:
	}
	hangUp()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("the poll kept waiting after the client left")
	}
}

// startWorker starts a worker of cfg and stops it when the test ends.
func startWorker(t testing.TB, cfg worker.Config) *worker.Worker {
	t.Helper()
	w, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	return w
}
