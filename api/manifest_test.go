package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// setupEnv is setup over an env built with opts.
func setupEnv(t *testing.T, opts testenv.Options, cfg api.Config) *bundle {
	t.Helper()
	if opts.Store == nil {
		opts.Store = memory.New()
	}
	env := testenv.Start(t, opts)
	cfg.Engine, cfg.Logger = env.Engine, env.Logger
	srv, err := api.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := serveBundle(t, env, srv, cfg.Token)
	return b
}

// withBackfill is a job that also declares a backfill, as a backfill job will.
type withBackfill struct{ jobs.Definition }

func (w withBackfill) Declarations() []jobs.Declaration {
	d, err := jobs.NewDeclaration(jobs.DeclareBackfill, w.Name()+"-2025", map[string]string{"name": w.Name() + "-2025", "from": "2025-01-01"})
	if err != nil {
		panic(err)
	}
	return []jobs.Declaration{d}
}

// TestUndeclaredJobIsRefusedAtEnqueue: by default, an enqueue of a job no worker declared (a
// typo) is refused and creates nothing; once a worker declares it, it is accepted, on the
// declared queue, and only there.
func TestUndeclaredJobIsRefusedAtEnqueue(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, testenv.Options{RequireDeclared: true}, api.Config{})
	ctx := context.Background()
	st, _, out := b.call(t, http.MethodPost, "/v1/runs", api.ContentJSON, "", []byte(`{"job":"send-invoce","key":"k","noTenant":true}`))
	if st != http.StatusNotFound || jsonCode(t, out) != jobs.CodeJobUndeclared {
		t.Fatalf("a mistyped job = %d %s", st, out)
	}
	if _, err := b.client.Enqueue(ctx, jobs.EnqueueRequest{Job: "send-invoce", Key: "k", NoTenant: true}); !jobs.HasCode(err, jobs.CodeJobUndeclared) {
		t.Fatalf("a mistyped job through the client: %v", err)
	}
	if runs, _ := b.env.Engine.ListRuns(ctx, store.ListParams{}); len(runs) != 0 {
		t.Fatalf("refused enqueues created %d runs", len(runs))
	}

	b.remoteWorker(t, withBackfill{testenv.Untyped("send-invoice", "billing")})
	res, err := b.client.Enqueue(ctx, jobs.EnqueueRequest{Job: "send-invoice", Key: "k", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	run, err := b.env.Engine.GetRun(ctx, res.RunID)
	if err != nil || run.Queue != "billing" {
		t.Fatalf("an enqueue naming no queue went to %q (%v), want the declared billing", run.Queue, err)
	}
	if _, err := b.client.Enqueue(ctx, jobs.EnqueueRequest{Job: "send-invoice", Queue: "default", Key: "k2", NoTenant: true}); !jobs.HasCode(err, jobs.CodeJobUndeclared) {
		t.Fatalf("an enqueue on a queue the job is not declared on: %v", err)
	}

	// The manifest shows the worker, its job and what the job declares besides.
	st, _, out = b.call(t, http.MethodGet, "/v1/manifest", "", "", nil)
	var v engine.ManifestView
	if st != http.StatusOK || json.Unmarshal(out, &v) != nil {
		t.Fatalf("GET /v1/manifest = %d %s", st, out)
	}
	if len(v.Workers) != 1 || !v.Workers[0].Live || len(v.Declarations) != 2 {
		t.Fatalf("manifest %s", out)
	}
	backfills, err := b.env.Engine.Declarations(ctx, jobs.DeclareBackfill)
	if err != nil || len(backfills) != 1 || backfills[0].Name != "send-invoice-2025" || !backfills[0].Live ||
		!strings.Contains(string(backfills[0].Data), "2025-01-01") {
		t.Fatalf("backfills %+v %v", backfills, err)
	}
	jobsOnly, err := b.client.Manifest(ctx, jobs.DeclareJob)
	if err != nil || len(jobsOnly.Declarations) != 1 || jobsOnly.Declarations[0].Checksum == "" {
		t.Fatalf("jobs %+v %v", jobsOnly, err)
	}
}

// TestUndeclaredRunSaysWhyItWaits: with AllowUndeclared, a run of a job no worker declared is
// accepted and its view says why it waits; so does a run whose workers stopped resending.
func TestUndeclaredRunSaysWhyItWaits(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{}) // the test env allows undeclared jobs
	ctx := context.Background()
	res, err := b.client.Enqueue(ctx, jobs.EnqueueRequest{Job: "ghost", Key: "k", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	v, err := b.client.GetRun(ctx, res.RunID)
	if err != nil || !strings.Contains(v.Waiting, `no worker has declared job "ghost"`) {
		t.Fatalf("waiting %q, %v", v.Waiting, err)
	}

	testenv.Declare(t, b.client, "w", testenv.Untyped("j", "q"))
	res, err = b.client.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Key: "k", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := b.client.GetRun(ctx, res.RunID); v.Waiting != "" {
		t.Fatalf("a run a live worker hosts waits for %q", v.Waiting)
	}
	b.env.Fake().Advance(time.Hour) // the worker has not resent its manifest for an hour
	if v, _ := b.client.GetRun(ctx, res.RunID); !strings.Contains(v.Waiting, `no live worker declares job "j"`) {
		t.Fatalf("waiting %q", v.Waiting)
	}
}

// TestPollIsHeldToTheManifest: a worker polls only the queues it declared, is handed only runs of
// jobs it declared, and the fleet cap is the declared one whatever the poll says.
func TestPollIsHeldToTheManifest(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	ctx := context.Background()
	poll := func(worker string, queues []string, limits map[string]int) ([]frontend.Task, error) {
		return b.client.Poll(ctx, frontend.PollRequest{WorkerID: worker, Queues: queues, Max: 10, Limits: limits})
	}
	if _, err := poll("stranger", []string{"q"}, nil); !jobs.HasCode(err, jobs.CodeQueueUndeclared) {
		t.Fatalf("a worker with no manifest: %v", err)
	}
	capped := jobs.MustDefine("capped", func(s any) string { return "" }, jobs.NoTenant[any](),
		func(*jobs.Ctx, any) (any, error) { return nil, nil }, jobs.Queue("q"), jobs.Concurrency(1))
	testenv.Declare(t, b.client, "w", capped)
	if _, err := poll("w", []string{"q", "other"}, nil); !jobs.HasCode(err, jobs.CodeQueueUndeclared) {
		t.Fatalf("a queue the worker did not declare: %v", err)
	}
	for _, k := range []string{"a", "b"} {
		if _, err := b.env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "capped", Key: k, NoTenant: true}); err != nil {
			t.Fatal(err)
		}
	}
	stray, err := b.env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "stray", Queue: "q", Key: "s", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	// The poll claims to hold no cap (a worker bypassing it) and to cap another job at 0.
	tasks, err := poll("w", []string{"q"}, map[string]int{"capped": 100, "stray": 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 || tasks[0].Job != "capped" {
		t.Fatalf("tasks %+v: want one run of capped (its declared cap is 1), and no stray", tasks)
	}
	run, err := b.env.Engine.GetRun(ctx, stray.RunID)
	if err != nil || run.State != store.StateDelayed || run.Attempt != 1 {
		t.Fatalf("the stray run: %s attempt %d (%v); want handed back, no attempt spent", run.State, run.Attempt, err)
	}
}

// slotless is a store that cannot hold fleet concurrency slots.
type slotless struct{ store.Store }

func (slotless) HoldsSlots() bool { return false }

// TestConcurrencyUnenforceable: a worker declaring a fleet cap to an engine whose store cannot
// hold it refuses to start, with X_JOB_CONCURRENCY_UNENFORCEABLE.
func TestConcurrencyUnenforceable(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, testenv.Options{Store: slotless{memory.New()}}, api.Config{})
	capped := jobs.MustDefine("capped", func(s any) string { return "" }, jobs.NoTenant[any](),
		func(*jobs.Ctx, any) (any, error) { return nil, nil }, jobs.Concurrency(2))
	reg, err := jobs.NewRegistry(capped)
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Config{Frontend: b.client, Registry: reg, Logger: b.env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); !jobs.HasCode(err, jobs.CodeJobConcurrencyUnenforced) {
		_ = w.Stop(context.Background())
		t.Fatalf("start: %v, want X_JOB_CONCURRENCY_UNENFORCEABLE", err)
	}
	// Without a cap it starts.
	plain, _ := jobs.NewRegistry(testenv.Untyped("plain", "default"))
	w2, err := worker.New(worker.Config{Frontend: b.client, Registry: plain, Logger: b.env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = w2.Stop(context.Background())
}
