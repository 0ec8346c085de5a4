package backfill_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

func TestPassSweepsEveryRowAndCompletesItsLedgerRow(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, env *testenv.Env) {
		tb := newTable(25)
		b := backfill.MustDefine("sweep-all", backfill.AllTenants(), tb.source(), tb.handle,
			backfill.BatchSize(10), backfill.Rate(1e6), backfill.Count(tb.left))
		startWorker(env, "test", b)
		res := enqueue(t, env, b, backfill.Input{})
		run := env.Await(res.RunID, store.StateCompleted)
		out := result(t, b, run)
		if out.Rows != 25 || out.Batches != 3 || out.Skipped {
			t.Fatalf("result = %+v; want 25 rows in 3 batches", out)
		}
		if got := stepNames(env, res.RunID); !slices.Equal(got, []string{"batch:0", "batch:1", "batch:2"}) {
			t.Fatalf("steps = %v", got)
		}
		for id, n := range tb.handled {
			if n != 1 {
				t.Errorf("row %d handled %d times", id, n)
			}
		}
		if len(tb.handled) != 25 {
			t.Fatalf("handled %d rows; want 25", len(tb.handled))
		}
		rows := ledger(t, env, "sweep-all")
		if len(rows) != 1 {
			t.Fatalf("ledger holds %d rows; want 1", len(rows))
		}
		r := rows[0]
		if r.Status != backfill.StatusCompleted || r.Rows != 25 || r.Batches != 3 || r.RunID != res.RunID ||
			r.Checksum != b.Declaration().Checksum || r.AppVersion != "test-1" || r.Total != 25 || r.Cursor != "[25]" ||
			r.CompletedAt.IsZero() {
			t.Fatalf("ledger row = %+v", r)
		}
	})
}

func TestCheckpointHoldsACursorAndACountNeverRows(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, env *testenv.Env) {
		tb := newTable(4)
		b := backfill.MustDefine("checkpoint-shape", backfill.AllTenants(), tb.source(), tb.handle, backfill.BatchSize(3), backfill.Rate(1e6))
		startWorker(env, "", b)
		res := enqueue(t, env, b, backfill.Input{})
		env.Await(res.RunID, store.StateCompleted)
		var cps []backfill.Checkpoint
		for _, ev := range env.History(res.RunID) {
			if ev.Kind == "StepCompleted" {
				var cp map[string]any
				if err := jobs.Decode(stepOutput(t, ev), &cp); err != nil {
					t.Fatal(err)
				}
				for k := range cp {
					if k != "cursor" && k != "rows" && k != "done" {
						t.Fatalf("checkpoint holds %q: %v", k, cp)
					}
				}
				var c backfill.Checkpoint
				_ = jobs.Decode(stepOutput(t, ev), &c)
				cps = append(cps, c)
			}
		}
		if len(cps) != 2 || cps[0].Rows != 3 || cps[1].Rows != 4 || !cps[1].Done {
			t.Fatalf("checkpoints = %+v", cps)
		}
	})
}

func TestReEnqueueIsTheSameLivePassAndACompletedPassIsSkipped(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, env *testenv.Env) {
		tb := newTable(5)
		gate := make(chan struct{})
		handle := func(ctx context.Context, bt backfill.Batch[row]) error {
			<-gate
			return tb.handle(ctx, bt)
		}
		b := backfill.MustDefine("once", backfill.AllTenants(), tb.source(), handle, backfill.Rate(1e6))
		startWorker(env, "", b)
		first := enqueue(t, env, b, backfill.Input{})
		again := enqueue(t, env, b, backfill.Input{})
		if !again.Deduped || again.RunID != first.RunID {
			t.Fatalf("re-enqueue of a live pass = %+v; want the same run %s, deduped", again, first.RunID)
		}
		close(gate)
		env.Await(first.RunID, store.StateCompleted)

		// The pass is the no-op, never the enqueue: a real run, whose result says it skipped.
		skip := enqueue(t, env, b, backfill.Input{})
		if skip.Deduped || skip.RunID == first.RunID {
			t.Fatalf("enqueue after completion = %+v; want a new run", skip)
		}
		out := result(t, b, env.Await(skip.RunID, store.StateCompleted))
		if !out.Skipped || out.PreviousRunID != first.RunID || out.Rows != 0 || out.Batches != 0 {
			t.Fatalf("skipped result = %+v; want skipped, previous %s", out, first.RunID)
		}
		if len(stepNames(env, skip.RunID)) != 0 {
			t.Fatal("a skipped pass ran pages")
		}
		if rows := ledger(t, env, "once"); len(rows) != 1 {
			t.Fatalf("a skipped pass wrote a ledger row: %d rows", len(rows))
		}

		// Force sweeps again, into a new row.
		for _, r := range tb.rows {
			r.Done = false
		}
		forced := enqueue(t, env, b, backfill.Input{Force: true})
		out = result(t, b, env.Await(forced.RunID, store.StateCompleted))
		if out.Skipped || out.Rows != 5 {
			t.Fatalf("forced result = %+v", out)
		}
		rows := ledger(t, env, "once")
		if len(rows) != 2 || rows[0].RunID != forced.RunID || rows[1].RunID != first.RunID ||
			rows[0].Status != backfill.StatusCompleted || rows[1].Status != backfill.StatusCompleted {
			t.Fatalf("ledger after force = %+v; want a new completed row beside the first", rows)
		}
	})
}

func TestARetryAdoptsItsRowAndResumesAtThePageItStoppedAt(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, env *testenv.Env) {
		tb := newTable(30)
		tb.failPage[2] = 1 // the third page fails once
		b := backfill.MustDefine("resume", backfill.AllTenants(), tb.source(), tb.handle,
			backfill.BatchSize(10), backfill.Rate(1e6), fastRetry)
		startWorker(env, "", b)
		res := enqueue(t, env, b, backfill.Input{})
		run := env.Await(res.RunID, store.StateCompleted)
		if run.Attempt != 2 {
			t.Fatalf("attempt = %d; want 2", run.Attempt)
		}
		// Pages 0 and 1 replayed from their checkpoints: handled once, read once.
		if tb.pageCalls(0) != 1 || tb.pageCalls(1) != 1 || tb.pageCalls(2) != 2 {
			t.Fatalf("handler calls per page = %v; want pages 0 and 1 once, page 2 twice", tb.perPage)
		}
		if n := tb.statements(); n != 5 { // pages 0, 1, 2 (failed), 2 again, and the empty page
			t.Fatalf("statements = %d; want 5 (no statement for a replayed page)", n)
		}
		rows := ledger(t, env, "resume")
		if len(rows) != 1 || rows[0].RunID != res.RunID || rows[0].Status != backfill.StatusCompleted || rows[0].Rows != 30 {
			t.Fatalf("ledger = %+v; want the one row of the run, adopted by the retry", rows)
		}
		if !rows[0].StartedAt.Before(rows[0].CompletedAt) || rows[0].StartedAt.After(run.CreatedAt.Add(5*time.Second)) {
			t.Fatalf("started_at %s: want when the pass began", rows[0].StartedAt)
		}
	})
}

func TestCountAfterTheLastPage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		count func(context.Context) (int64, error)
		code  jobs.Code
	}{
		{"stalled", func(context.Context) (int64, error) { return 3, nil }, jobs.CodeBackfillStalled},
		{"negative", func(context.Context) (int64, error) { return -1, nil }, jobs.CodeInvariant},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, env *testenv.Env) {
				tb := newTable(3)
				calls := 0
				count := func(ctx context.Context) (int64, error) {
					calls++
					if calls == 1 { // the count at the start, for progress
						return 3, nil
					}
					return c.count(ctx)
				}
				b := backfill.MustDefine("count-"+c.name, backfill.AllTenants(), tb.source(), tb.handle, backfill.Rate(1e6),
					backfill.Count(count), fastRetry)
				startWorker(env, "", b)
				res := enqueue(t, env, b, backfill.Input{})
				run := env.Await(res.RunID, store.StateFailed)
				if run.ErrorCode != string(c.code) || run.Attempt != 1 || run.StopReason != "terminal" {
					t.Fatalf("run = %s attempt %d stop %q (%s); want %s, terminal on attempt 1", run.ErrorCode, run.Attempt, run.StopReason, run.Error, c.code)
				}
				rows := ledger(t, env, "count-"+c.name)
				if len(rows) != 1 || rows[0].Status != backfill.StatusFailed || !strings.Contains(rows[0].Error, string(c.code)) {
					t.Fatalf("ledger = %+v; want the row failed with %s", rows, c.code)
				}
			})
		})
	}
}

func TestEnvironmentIsEnforcedInsideThePass(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, env *testenv.Env) {
		tb := newTable(3)
		b := backfill.MustDefine("prod-only", backfill.AllTenants(), tb.source(), tb.handle, backfill.Rate(1e6),
			backfill.Environments("production"), fastRetry)
		startWorker(env, "staging", b)
		res := enqueue(t, env, b, backfill.Input{Force: true})
		run := env.Await(res.RunID, store.StateFailed)
		if run.ErrorCode != string(jobs.CodeBackfillEnvironment) || run.Attempt != 1 {
			t.Fatalf("run = %s attempt %d; want X_BACKFILL_ENVIRONMENT on attempt 1", run.ErrorCode, run.Attempt)
		}
		if tb.statements() != 0 || len(ledger(t, env, "prod-only")) != 0 {
			t.Fatal("a refused pass read the source or wrote the ledger")
		}
	})
}

func TestAMovedChecksumWarnsAndNeverRefuses(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, env *testenv.Env) {
		tb := newTable(2)
		v1 := backfill.MustDefine("moving", backfill.AllTenants(), tb.source(), tb.handle, backfill.Rate(1e6), backfill.Version("1"))
		w := startWorker(env, "", v1)
		first := enqueue(t, env, v1, backfill.Input{})
		env.Await(first.RunID, store.StateCompleted)
		_ = w.Stop(context.Background())

		v2 := backfill.MustDefine("moving", backfill.AllTenants(), tb.source(), tb.handle, backfill.Rate(1e6), backfill.Version("2"))
		if v1.Declaration().Checksum == v2.Declaration().Checksum {
			t.Fatal("a new version kept the checksum")
		}
		startWorker(env, "", v2)
		second := enqueue(t, env, v2, backfill.Input{Force: true})
		out := result(t, v2, env.Await(second.RunID, store.StateCompleted))
		if len(out.Warnings) != 1 || !strings.Contains(out.Warnings[0], "checksum moved") {
			t.Fatalf("warnings = %q; want the moved checksum", out.Warnings)
		}
	})
}

// noLedger is a front end that keeps no ledger.
type noLedger struct{ frontend.Frontend }

func (noLedger) BackfillOpen(context.Context, frontend.BackfillOpenRequest) (frontend.BackfillOpenResponse, error) {
	return frontend.BackfillOpenResponse{Ledger: false}, nil
}

func (noLedger) BackfillReport(context.Context, frontend.BackfillReportRequest) error {
	panic("a pass reported to a front end without a ledger")
}

func TestAFrontEndWithoutALedgerRunsThePassAnyway(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, env *testenv.Env) {
		tb := newTable(12)
		b := backfill.MustDefine("no-ledger", backfill.AllTenants(), tb.source(), tb.handle, backfill.BatchSize(5), backfill.Rate(1e6))
		env.Worker(workerConfig(noLedger{env.Engine}), b)
		res := enqueue(t, env, b, backfill.Input{})
		out := result(t, b, env.Await(res.RunID, store.StateCompleted))
		if out.Rows != 12 || len(ledger(t, env, "no-ledger")) != 0 {
			t.Fatalf("result = %+v; want every row swept and no ledger row", out)
		}
	})
}

func TestPerTenantPassScopesEveryPage(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, env *testenv.Env) {
		tb := newTable(10)
		b := backfill.MustDefine("per-org", backfill.PerTenant(), tb.source(), tb.handle, backfill.BatchSize(2), backfill.Rate(1e6))
		startWorker(env, "", b)
		res := enqueue(t, env, b, backfill.Input{Tenant: "org-1"})
		run := env.Await(res.RunID, store.StateCompleted)
		if run.Tenant != "org-1" || result(t, b, run).Rows != 5 {
			t.Fatalf("run tenant %q, result %+v; want org-1's 5 rows", run.Tenant, result(t, b, run))
		}
		for id := range tb.handled {
			if tb.rows[id].Tenant != "org-1" {
				t.Fatalf("row %d of %s handled by org-1's pass", id, tb.rows[id].Tenant)
			}
		}
		if _, err := b.Enqueue(context.Background(), env.Engine, backfill.Input{}); !jobs.HasCode(err, jobs.CodeJobTenantRequired) {
			t.Fatalf("per-tenant enqueue without a tenant: %v; want X_JOB_TENANT_REQUIRED", err)
		}
	})
}

// A worker on an engine that serves no ledger routes (one from before backfills) sweeps anyway.
func TestAnEngineWithoutLedgerRoutesRunsThePassAnyway(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/worker/backfill/") {
			r.URL.Path = "/v1/worker/unknown"
		}
		srv.ServeHTTP(w, r)
	}))
	defer old.Close()
	defer srv.Drain()
	c, err := api.NewClient(old.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tb := newTable(7)
	b := backfill.MustDefine("old-engine", backfill.AllTenants(), tb.source(), tb.handle, backfill.BatchSize(3), backfill.Rate(1e6))
	w := env.Worker(workerConfig(c), b)
	res := enqueue(t, env, b, backfill.Input{})
	out := result(t, b, env.Await(res.RunID, store.StateCompleted))
	_ = w.Stop(context.Background())
	if out.Rows != 7 || len(out.Warnings) != 0 || len(ledger(t, env, "old-engine")) != 0 {
		t.Fatalf("result = %+v; want every row swept, no warning, no ledger row", out)
	}
}

// flakyLedger fails its first opens as a store that is down would.
type flakyLedger struct {
	frontend.Frontend
	fails *atomic.Int32
}

func (f flakyLedger) BackfillOpen(ctx context.Context, req frontend.BackfillOpenRequest) (frontend.BackfillOpenResponse, error) {
	if f.fails.Add(-1) >= 0 {
		return frontend.BackfillOpenResponse{}, jobs.Errorf(jobs.CodeStoreUnavailable, "injected")
	}
	return f.Frontend.BackfillOpen(ctx, req)
}

// A ledger that is there but failing fails the attempt (retried), rather than letting the pass
// sweep without a row and leave the name pending once it completed.
func TestAFailingLedgerFailsTheAttempt(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
	fails := &atomic.Int32{}
	fails.Store(4) // every try of the first attempt
	tb := newTable(4)
	b := backfill.MustDefine("flaky-ledger", backfill.AllTenants(), tb.source(), tb.handle, backfill.Rate(1e6), fastRetry)
	env.Worker(workerConfig(flakyLedger{env.Engine, fails}), b)
	res := enqueue(t, env, b, backfill.Input{})
	run := env.Await(res.RunID, store.StateCompleted)
	if run.Attempt != 2 || tb.statements() != 1 {
		t.Fatalf("attempt %d, %d statements; want the first attempt refused before any page", run.Attempt, tb.statements())
	}
	if rows := ledger(t, env, "flaky-ledger"); len(rows) != 1 || rows[0].Status != backfill.StatusCompleted {
		t.Fatalf("ledger = %+v; want the pass's completed row", rows)
	}
}
