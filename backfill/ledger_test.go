package backfill_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// The ledger calls are the worker protocol's: only the worker holding the run, under its fence,
// writes its row; anything else is refused with a clear code and changes nothing.
func TestLedgerCallsRefuseAnyoneButTheClaimHolder(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		tb := newTable(1)
		b := backfill.MustDefine("guarded", backfill.AllTenants(), tb.source(), tb.handle)
		res := enqueue(t, env, b, backfill.Input{})
		open := func(c frontend.Claim, name string) (frontend.BackfillOpenResponse, error) {
			return env.Engine.BackfillOpen(ctx, frontend.BackfillOpenRequest{Claim: c, Name: name, Checksum: "sum", Total: -1})
		}
		// Not claimed yet: no token was ever issued.
		if _, err := open(frontend.Claim{RunID: res.RunID, Fence: 1, WorkerID: "w"}, "guarded"); !jobs.HasCode(err, jobs.CodeLeaseInvalid) {
			t.Fatalf("open of an unclaimed run: %v; want X_LEASE_INVALID", err)
		}
		testenv.Declare(t, env.Engine, "w", b)
		tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"default"}, Max: 1, Wait: time.Second})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("poll: %v, %d tasks", err, len(tasks))
		}
		claim := frontend.Claim{RunID: res.RunID, Fence: tasks[0].Fence, WorkerID: "w", LeaseToken: tasks[0].LeaseToken}
		for _, c := range []struct {
			claim frontend.Claim
			name  string
			code  jobs.Code
		}{
			{frontend.Claim{RunID: res.RunID, Fence: claim.Fence + 1, WorkerID: "w", LeaseToken: claim.LeaseToken}, "guarded", jobs.CodeLeaseInvalid},
			{frontend.Claim{RunID: res.RunID, Fence: claim.Fence, WorkerID: "other", LeaseToken: claim.LeaseToken}, "guarded", jobs.CodeLeaseInvalid},
			{frontend.Claim{RunID: res.RunID, Fence: claim.Fence, WorkerID: "w"}, "guarded", jobs.CodeLeaseInvalid},
			{claim, "another-backfill", jobs.CodeBadRequest},
			{claim, "", jobs.CodeBadRequest},
			{frontend.Claim{RunID: "no-such-run", Fence: 1, WorkerID: "w", LeaseToken: claim.LeaseToken}, "guarded", jobs.CodeLeaseInvalid},
			{frontend.Claim{RunID: "", Fence: 1, WorkerID: "w"}, "guarded", jobs.CodeBadRequest},
			{frontend.Claim{RunID: "bad\x00id", Fence: 1, WorkerID: "w"}, "guarded", jobs.CodeBadRequest},
		} {
			if _, err := open(c.claim, c.name); !jobs.HasCode(err, c.code) {
				t.Errorf("open(%+v, %q): %v; want %s", c.claim, c.name, err, c.code)
			}
		}
		if rows := ledger(t, env, "guarded"); len(rows) != 0 {
			t.Fatalf("refused opens wrote %d rows", len(rows))
		}
		// The holder opens; a resend adopts the same row.
		for i, wantAdopted := range []bool{false, true} {
			resp, err := open(claim, "guarded")
			if err != nil || !resp.Ledger || resp.Adopted != wantAdopted || resp.Row.Status != "running" {
				t.Fatalf("open #%d: %+v, %v", i+1, resp, err)
			}
		}
		report := func(r frontend.BackfillReportRequest) error { return env.Engine.BackfillReport(ctx, r) }
		if err := report(frontend.BackfillReportRequest{Claim: claim, Rows: 7, Batches: 1, Cursor: "[7]"}); err != nil {
			t.Fatal(err)
		}
		for name, r := range map[string]frontend.BackfillReportRequest{
			"bad status":    {Claim: claim, Rows: 9, Batches: 2, Status: "done"},
			"negative rows": {Claim: claim, Rows: -1, Batches: 2},
			"stale fence":   {Claim: frontend.Claim{RunID: res.RunID, Fence: claim.Fence - 1, WorkerID: "w", LeaseToken: claim.LeaseToken}, Rows: 9, Batches: 2},
			"no token":      {Claim: frontend.Claim{RunID: res.RunID, Fence: claim.Fence, WorkerID: "w"}, Rows: 9, Batches: 2},
		} {
			if err := report(r); err == nil || jobs.CodeOf(err) == "" {
				t.Errorf("%s: %v; want a refusal with a code", name, err)
			}
		}
		rows := ledger(t, env, "guarded")
		if len(rows) != 1 || rows[0].Rows != 7 || rows[0].Cursor != "[7]" || rows[0].Status != "running" {
			t.Fatalf("after refused reports: %+v; want 7 rows, cursor [7]", rows)
		}
		// The cursor is text for people: one a store cannot keep (a NUL) or longer than the
		// ledger keeps is made storable and cut, never a reason to refuse the report.
		if err := report(frontend.BackfillReportRequest{Claim: claim, Rows: 8, Batches: 2, Cursor: "\x00" + strings.Repeat("k", 1500)}); err != nil {
			t.Fatalf("a report with a NUL and a 1,501-byte cursor: %v; want it kept", err)
		}
		rows = ledger(t, env, "guarded")
		if c := rows[0].Cursor; rows[0].Rows != 8 || len(c) > backfill.MaxCursorText || !strings.HasPrefix(c, "\uFFFDkkk") || !strings.HasSuffix(c, "k…") {
			t.Fatalf("after a long cursor: %d rows, cursor %d bytes %.12q…; want 8 rows and the cursor cleaned and cut", rows[0].Rows, len(c), c)
		}
		if _, err := env.Engine.Cancel(ctx, res.RunID, "test"); err != nil {
			t.Fatal(err)
		}
		if err := report(frontend.BackfillReportRequest{Claim: claim, Rows: 9, Batches: 2}); !jobs.HasCode(err, jobs.CodeAborted) {
			t.Fatalf("report on a cancelled run: %v; want X_ABORTED", err)
		}
		if rows := ledger(t, env, "guarded"); rows[0].Status != backfill.StatusFailed || rows[0].Rows != 8 {
			t.Fatalf("a cancelled pass's row reads %+v; want failed (from its run) at 8 rows", rows[0])
		}
	})
}

// A cancelled pass's row is final when the cancel lands: its pass reports its end, which the
// engine records failed with the cancel's reason. Before, the engine refused that report, the row
// stayed running, read failed only while the run was there to reconcile it with, and read running
// for good (in flight, never pending) once retention deleted the run.
func TestACancelledPassRecordsItsEndWithTheReason(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{Lease: 300 * time.Millisecond}, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		tb := newTable(5)
		b := backfill.MustDefine("cancelled-pass", backfill.AllTenants(), tb.source(), tb.handle,
			backfill.BatchSize(1), backfill.Rate(0.001)) // a page every 1,000 s
		w := startWorker(env, "", b)
		res := enqueue(t, env, b, backfill.Input{})
		eventually(t, "the step of page 0 recorded", func() bool { return len(stepNames(env, res.RunID)) == 1 }, nil)
		if _, err := env.Engine.Cancel(ctx, res.RunID, "operator: wrong table"); err != nil {
			t.Fatal(err)
		}
		stop, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := w.Stop(stop); err != nil {
			t.Fatal(err)
		}
		// The store's row itself, not the projection, which reconciles a running row with its run.
		rows, err := env.Store.BackfillList(ctx, store.BackfillFilter{RunID: res.RunID})
		if err != nil || len(rows) != 1 {
			t.Fatalf("ledger = %+v, %v", rows, err)
		}
		if r := rows[0]; r.Status != store.BackfillFailed || r.Rows != 1 || !strings.Contains(r.Error, string(jobs.CodeRunCancelled)) ||
			!strings.Contains(r.Error, "operator: wrong table") {
			t.Fatalf("stored row = %+v; want failed after 1 row, with X_RUN_CANCELLED and the reason", r)
		}
	})
}

// A running row whose run can never end it is written failed: a cancelled run whose pass was not
// there to report (its worker died, or it sat between attempts) on the first read, and one whose
// run retention deleted before anyone read it reads failed rather than running for good.
func TestARunningRowWhoseRunCannotEndItReadsFailed(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{Retention: engine.RetentionConfig{Completed: time.Minute, Every: time.Hour}},
		func(t *testing.T, env *testenv.Env) {
			ctx := context.Background()
			// open claims a pass of b by hand and opens its row, as a worker that then dies would.
			open := func(b *backfill.Backfill[row], worker string) string {
				t.Helper()
				res := enqueue(t, env, b, backfill.Input{})
				testenv.Declare(t, env.Engine, worker, b)
				tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: worker, Queues: []string{"default"}, Max: 1, Wait: time.Second})
				if err != nil || len(tasks) != 1 || tasks[0].RunID != res.RunID {
					t.Fatalf("poll: %v, %+v", err, tasks)
				}
				claim := frontend.Claim{RunID: res.RunID, Fence: tasks[0].Fence, WorkerID: worker, LeaseToken: tasks[0].LeaseToken}
				if _, err := env.Engine.BackfillOpen(ctx, frontend.BackfillOpenRequest{Claim: claim, Name: b.Declaration().Name,
					Checksum: "sum", Total: -1}); err != nil {
					t.Fatal(err)
				}
				if err := env.Engine.BackfillReport(ctx, frontend.BackfillReportRequest{Claim: claim, Rows: 7, Batches: 1, Cursor: "[7]"}); err != nil {
					t.Fatal(err)
				}
				return res.RunID
			}
			stored := func(runID string) store.Backfill {
				t.Helper()
				rows, err := env.Store.BackfillList(ctx, store.BackfillFilter{RunID: runID})
				if err != nil || len(rows) != 1 {
					t.Fatalf("ledger = %+v, %v", rows, err)
				}
				return rows[0]
			}
			tb := newTable(1)

			// Cancelled while nobody runs the pass: the cancel writes the row failed with the
			// reason, before anyone reads it.
			settled := backfill.MustDefine("settled-on-read", backfill.AllTenants(), tb.source(), tb.handle)
			id := open(settled, "w1")
			if _, err := env.Engine.Cancel(ctx, id, "stop it"); err != nil {
				t.Fatal(err)
			}
			if r := stored(id); r.Status != store.BackfillFailed || r.Rows != 7 || !strings.Contains(r.Error, "stop it") {
				t.Fatalf("stored row right after the cancel = %+v; want failed at 7 rows with the reason", r)
			}
			if p := ledger(t, env, "settled-on-read"); len(p) != 1 || p[0].Status != backfill.StatusFailed || !strings.Contains(p[0].Error, "stop it") {
				t.Fatalf("projection = %+v; want failed with the cancel's reason", p)
			}

			// Cancelled where the settling write was lost (the cancel committed in the store, the
			// engine died before the ledger's write), and its run deleted by retention before
			// anyone read the row: the read writes it failed.
			gone := backfill.MustDefine("gone-before-read", backfill.AllTenants(), tb.source(), tb.handle)
			id = open(gone, "w2")
			now := env.Clock.Now()
			if _, err := env.Store.RunCancel(ctx, id, history.New(now, history.RunCancelled{Reason: "stop that too"}), now); err != nil {
				t.Fatal(err)
			}
			if r := stored(id); r.Status != store.BackfillRunning {
				t.Fatalf("before any read the row is %s; want still running (nobody wrote its end)", r.Status)
			}
			env.Fake().Advance(2 * time.Minute)
			if _, err := env.Engine.SweepRetention(ctx, false); err != nil {
				t.Fatal(err)
			}
			if _, err := env.Engine.GetRun(ctx, id); !jobs.HasCode(err, jobs.CodeRunNotFound) {
				t.Fatalf("the cancelled run after the sweep: %v; want it deleted", err)
			}
			p := ledger(t, env, "gone-before-read")
			if len(p) != 1 || p[0].Status != backfill.StatusFailed || p[0].Error == "" {
				t.Fatalf("projection = %+v; want failed, saying the run is gone", p)
			}
			if r := stored(id); r.Status != store.BackfillFailed || r.Rows != 7 {
				t.Fatalf("stored row = %+v; want failed at 7 rows", r)
			}
			if running, err := env.Engine.InspectBackfills(ctx, store.BackfillFilter{Status: backfill.StatusRunning}); err != nil || len(running) != 0 {
				t.Fatalf("passes in flight = %+v, %v; want none", running, err)
			}
			rep, err := env.Engine.PendingBackfills(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rep.Pending, []string{"gone-before-read", "settled-on-read"}) {
				t.Fatalf("pending = %v; want both failed passes to sweep again", rep.Pending)
			}
		})
}

// A pass's last error is cut on a character, never inside one: Postgres refuses half a
// character, and the row stayed running for good where the pass had failed.
func TestALongMultiByteErrorEndsThePassRow(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		tb := newTable(1)
		b := backfill.MustDefine("long-error", backfill.AllTenants(), tb.source(), tb.handle)
		res := enqueue(t, env, b, backfill.Input{})
		testenv.Declare(t, env.Engine, "w", b)
		tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"default"}, Max: 1, Wait: time.Second})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("poll: %v, %d tasks", err, len(tasks))
		}
		claim := frontend.Claim{RunID: res.RunID, Fence: tasks[0].Fence, WorkerID: "w", LeaseToken: tasks[0].LeaseToken}
		if _, err := env.Engine.BackfillOpen(ctx, frontend.BackfillOpenRequest{Claim: claim, Name: "long-error", Checksum: "c", Total: -1}); err != nil {
			t.Fatal(err)
		}
		msg := strings.Repeat("€", 4000) + "\x00" // 12,001 bytes: the cut at 10,000 falls inside a €
		if err := env.Engine.BackfillReport(ctx, frontend.BackfillReportRequest{Claim: claim, Status: store.BackfillFailed, Error: msg}); err != nil {
			t.Fatalf("report: %v", err)
		}
		rows, err := env.Store.BackfillList(ctx, store.BackfillFilter{RunID: res.RunID})
		if err != nil || len(rows) != 1 || rows[0].Status != store.BackfillFailed || !strings.HasPrefix(rows[0].Error, "€€€") {
			t.Fatalf("row: %+v, %v; want failed with the error's start", rows, err)
		}
	})
}
