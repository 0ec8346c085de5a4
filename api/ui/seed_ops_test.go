package ui_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// The operators' data the backfills, schedules and manifest pages show: a backfill swept to
// completion, one mid-pass, one declared and never run (only for production), two schedules, and
// the workers that declare them.

type account struct {
	ID int `json:"id"`
}

// rowsSource pages ids 1..n, keyset on the id.
func rowsSource(n int) backfill.Source[account] {
	return backfill.SourceFunc[account](func(_ context.Context, req backfill.PageRequest) ([]account, backfill.Cursor, error) {
		after := int64(0)
		if req.After != nil {
			v, err := backfill.ParseCount(req.After[0])
			if err != nil {
				return nil, nil, err
			}
			after = v
		}
		var out []account
		for id := int(after) + 1; id <= n && len(out) < req.Limit; id++ {
			out = append(out, account{ID: id})
		}
		if len(out) == 0 {
			return nil, nil, nil
		}
		return out, backfill.Cursor{int64(out[len(out)-1].ID)}, nil
	})
}

func noop(context.Context, backfill.Batch[account]) error { return nil }

var (
	// tagAccounts sweeps its 5 rows in one page, so it completes without a rate pause.
	tagAccounts = backfill.MustDefine("tag-accounts", backfill.AllTenants(), rowsSource(5), noop, backfill.BatchSize(10))
	// purgeLegacy is declared for production and staging only, and never run.
	purgeLegacy = backfill.MustDefine("purge-legacy", backfill.AllTenants(), rowsSource(1), noop,
		backfill.Environments("production", "staging"), backfill.Requires("20260101_drop_legacy"))
)

type tickIn struct {
	N int `json:"n"`
}

var tick = jobs.MustDefine("tick", func(tickIn) string { return "tick" }, jobs.NoTenant[tickIn](),
	func(_ *jobs.Ctx, in tickIn) (int, error) { return in.N, nil }, jobs.Queue("manual"))

var (
	hourly  = scheduler.MustDefine("hourly-report", tick, "0 * * * *", "Europe/Berlin", tickIn{N: 1})
	nightly = scheduler.MustDefine("nightly-cleanup", tick, "30 2 * * *", "America/New_York", tickIn{N: 2},
		scheduler.CatchUp(scheduler.RunOnce))
)

// opsSeeded names what seedOps made.
type opsSeeded struct {
	completedPass, runningPass string
	sched                      *scheduler.Scheduler
}

// seedOps adds the backfills (a worker hosting them sweeps one and holds the other mid-pass)
// and a scheduler over two schedules that has run one round.
func seedOps(t *testing.T, env *testenv.Env) opsSeeded {
	t.Helper()
	ctx := context.Background()
	// reindex counts 30 rows and handles 10 a page; under the tests' fake clock its rate pause
	// before the second page lasts until the clock moves, so the pass stays running with 10
	// rows done while the test looks. Defined here: its count is this test's.
	var handled atomic.Int64
	reindex := backfill.MustDefine("reindex", backfill.AllTenants(), rowsSource(30),
		func(_ context.Context, b backfill.Batch[account]) error { handled.Add(int64(len(b.Rows))); return nil },
		backfill.BatchSize(10), backfill.Rate(2),
		backfill.Count(func(context.Context) (int64, error) { return 30 - handled.Load(), nil }))
	env.Worker(worker.Config{ID: "sweeper-1", PollWait: 100 * time.Millisecond}, tagAccounts, reindex, purgeLegacy)
	var out opsSeeded
	res, err := tagAccounts.Enqueue(ctx, env.Engine, backfill.Input{})
	if err != nil {
		t.Fatal(err)
	}
	env.Await(res.RunID, store.StateCompleted)
	out.completedPass = res.RunID
	if res, err = reindex.Enqueue(ctx, env.Engine, backfill.Input{}); err != nil {
		t.Fatal(err)
	}
	out.runningPass = res.RunID
	// Before the worker stops (cleanups run last first): move the clock until the pass is
	// through its pauses, so the worker's drain finds nothing in flight.
	t.Cleanup(func() {
		for range 200 {
			if r, err := env.Engine.GetRun(ctx, out.runningPass); err != nil || r.State.Finished() {
				return
			}
			env.Fake().Advance(time.Second)
			time.Sleep(5 * time.Millisecond)
		}
		t.Errorf("the reindex pass did not finish")
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		ps, err := env.Engine.InspectBackfills(ctx, store.BackfillFilter{RunID: res.RunID})
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) == 1 && ps[0].Rows == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reindex pass did not report its first page: %+v", ps)
		}
		time.Sleep(10 * time.Millisecond)
	}
	sc, err := scheduler.New(scheduler.Config{Engine: env.Engine, ID: "engine-a", Schedules: scheduler.Static(hourly, nightly), Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Stop(context.Background()) })
	if err := sc.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	out.sched = sc
	return out
}

// serveOps puts the API server with the scheduler over env, with these credentials (none:
// open on loopback).
func serveOps(t *testing.T, env *testenv.Env, sc *scheduler.Scheduler, token string, creds ...api.Credential) string {
	t.Helper()
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Scheduler: sc, Token: token, Credentials: creds, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)
	return ts.URL
}

// paused reads a schedule's paused state from the scheduler.
func paused(t *testing.T, sc *scheduler.Scheduler, name string) bool {
	t.Helper()
	in, err := sc.Get(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return in.Paused
}

// manualRuns lists the runs a manual trigger of name made.
func manualRuns(t *testing.T, env *testenv.Env, name string) []string {
	t.Helper()
	runs, err := env.Engine.Store().RunList(context.Background(), store.ListParams{Job: "tick", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range runs {
		if r.EnqueuedBy == "schedule:"+name+":manual" {
			out = append(out, r.ID)
		}
	}
	slices.Sort(out)
	return out
}
