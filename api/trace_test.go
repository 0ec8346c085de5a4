package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// sqliteBundle is an engine on SQLite behind the API, served by httptest, and a client of it.
func sqliteBundle(t *testing.T) *bundle {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Store: testenv.OpenSQLite(t)})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	return serveBundle(t, env, srv, "")
}

func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rec
}

func ended(rec *tracetest.SpanRecorder, prefix string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if strings.HasPrefix(s.Name(), prefix) {
			out = append(out, s)
		}
	}
	return out
}

// Over the HTTP worker protocol (engine on SQLite, a worker that reaches it only through the
// client) the parentage holds: the client's enqueue carries the caller's span in its headers,
// the run is stamped with it, and the remote worker's attempt and step spans descend from it.
func TestTraceOverHTTPWorkerProtocol(t *testing.T) {
	t.Parallel()
	tp, rec := recorder(t)
	b := sqliteBundle(t)
	job := jobs.MustDefine("checkout", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) {
			for _, name := range []string{"reserve", "charge", "ship"} {
				if _, err := jobs.Step(c, name, func(context.Context) (string, error) { return name, nil }); err != nil {
					return "", err
				}
			}
			return s, nil
		})
	reg, err := jobs.NewRegistry(job)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, worker.Config{Frontend: b.client, Registry: reg, Clock: b.env.Clock, Logger: b.env.Logger,
		PollWait: time.Second, TracerProvider: tp})

	ctx, enq := tp.Tracer("app").Start(t.Context(), "http POST /checkout")
	res, err := job.Enqueue(ctx, b.client, "o1")
	enq.End()
	if err != nil {
		t.Fatal(err)
	}
	b.env.Await(res.RunID, store.StateCompleted)
	view, err := b.client.GetRun(t.Context(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if view.TraceID != enq.SpanContext().TraceID().String() || !strings.Contains(view.TraceParent, enq.SpanContext().SpanID().String()) {
		t.Errorf("run view trace %q (%q), want the enqueuer's trace %s span %s", view.TraceID, view.TraceParent,
			enq.SpanContext().TraceID(), enq.SpanContext().SpanID())
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(ended(rec, worker.AttemptSpanPrefix)) == 0 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	attempts := ended(rec, worker.AttemptSpanPrefix)
	if len(attempts) != 1 {
		t.Fatalf("%d attempt spans, want 1", len(attempts))
	}
	a := attempts[0]
	if a.SpanContext().TraceID() != enq.SpanContext().TraceID() || a.Parent().SpanID() != enq.SpanContext().SpanID() {
		t.Errorf("attempt span: trace %s parent %s, want a child of %s/%s", a.SpanContext().TraceID(), a.Parent().SpanID(),
			enq.SpanContext().TraceID(), enq.SpanContext().SpanID())
	}
	steps := ended(rec, "jobs.step ")
	if len(steps) != 3 {
		t.Fatalf("%d step spans, want 3", len(steps))
	}
	for _, s := range steps {
		if s.Parent().SpanID() != a.SpanContext().SpanID() || s.SpanContext().TraceID() != a.SpanContext().TraceID() {
			t.Errorf("step span %s is not a child of the attempt", s.Name())
		}
	}
}

// An enqueue over the JSON admin API with a traceparent header is stamped with the remote
// caller's trace; a malformed header is ignored (W3C) and never fails the request.
func TestTraceHeaderOnAdminEnqueue(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	send := func(key, parent, state string) string {
		t.Helper()
		body := `{"job":"j","key":"` + key + `","noTenant":true,"input":{}}`
		req, err := http.NewRequest("POST", b.url+"/v1/runs", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if parent != "" {
			req.Header.Set("traceparent", parent)
		}
		if state != "" {
			req.Header.Set("tracestate", state)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out jobs.EnqueueResult
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode/100 != 2 {
			t.Fatalf("enqueue %s: status %d (%v)", key, res.StatusCode, err)
		}
		return out.RunID
	}
	view := func(id string) engine.RunView {
		t.Helper()
		status, _, body := b.call(t, "GET", "/v1/runs/"+id, "", "", nil)
		var v engine.RunView
		if err := json.Unmarshal(body, &v); err != nil || status != 200 {
			t.Fatalf("GET run %s: %d %s", id, status, body)
		}
		return v
	}
	v := view(send("traced", tp, "vendor=abc"))
	if v.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || v.TraceParent != tp {
		t.Errorf("traced enqueue: trace %q (%q), want the header's", v.TraceID, v.TraceParent)
	}
	run, err := b.env.Engine.GetRun(t.Context(), v.ID)
	if err != nil || run.TraceState != "vendor=abc" {
		t.Errorf("stored tracestate %q (%v), want the header's", run.TraceState, err)
	}
	for _, bad := range []string{"garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", strings.Repeat("0", 4000)} {
		if v := view(send("bad-"+bad[:5], bad, "")); v.TraceID != "" || v.TraceParent != "" {
			t.Errorf("malformed header %.20q stamped %q", bad, v.TraceParent)
		}
	}
	if v := view(send("none", "", "")); v.TraceID != "" {
		t.Errorf("an enqueue without a header stamped %q", v.TraceID)
	}
}

// In an fx app, a trace.TracerProvider in the graph is the worker's.
func TestTraceProviderFromFx(t *testing.T) {
	t.Parallel()
	tp, rec := recorder(t)
	job := jobs.MustDefine("fx-traced", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) { return s, nil })
	var eng *engine.Engine
	app := fxtest.New(t,
		fx.NopLogger,
		fx.Supply(testenv.Logger()),
		fx.Provide(func() store.Store { return memory.New() }),
		fx.Supply(engine.Config{PollFallback: 20 * time.Millisecond}),
		engine.Module,
		fx.Provide(func() (*jobs.Registry, error) { return jobs.NewRegistry(job) }),
		fx.Provide(func() trace.TracerProvider { return tp }),
		fx.Supply(worker.Config{PollWait: time.Second}),
		worker.Module,
		fx.Populate(&eng),
	)
	app.RequireStart()
	defer app.RequireStop()
	ctx, enq := tp.Tracer("app").Start(t.Context(), "enqueue")
	if _, err := job.Enqueue(ctx, eng, "x"); err != nil {
		t.Fatal(err)
	}
	enq.End()
	waitFor(t, func() bool { return len(ended(rec, worker.AttemptSpanPrefix+"fx-traced")) == 1 })
	if a := ended(rec, worker.AttemptSpanPrefix)[0]; a.Parent().SpanID() != enq.SpanContext().SpanID() {
		t.Errorf("attempt span's parent %s, want the enqueuer's %s", a.Parent().SpanID(), enq.SpanContext().SpanID())
	}
}

// Over the JSON admin API an actor id with a control character is refused, 400 X_ACTOR_INVALID,
// and nothing is created.
func TestActorRefusedOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	body := `{"job":"j","key":"k","noTenant":true,"enqueuedBy":"user:1\u001b[31m"}`
	status, _, out := b.call(t, "POST", "/v1/runs", "application/json", "", []byte(body))
	if status != http.StatusBadRequest || jsonCode(t, out) != jobs.CodeActorInvalid {
		t.Fatalf("status %d %s, want 400 X_ACTOR_INVALID", status, out)
	}
	runs, err := b.env.Engine.ListRuns(t.Context(), store.ListParams{})
	if err != nil || len(runs) != 0 {
		t.Errorf("%d runs (%v) after a refused enqueue", len(runs), err)
	}
}
