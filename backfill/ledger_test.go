package backfill_test

import (
	"context"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
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
		// Not claimed yet.
		if _, err := open(frontend.Claim{RunID: res.RunID, Fence: 1, WorkerID: "w"}, "guarded"); !jobs.HasCode(err, jobs.CodeJobLeaseLost) {
			t.Fatalf("open of an unclaimed run: %v; want X_JOB_LEASE_LOST", err)
		}
		testenv.Declare(t, env.Engine, "w", b)
		tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"default"}, Max: 1, Wait: time.Second})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("poll: %v, %d tasks", err, len(tasks))
		}
		claim := frontend.Claim{RunID: res.RunID, Fence: tasks[0].Fence, WorkerID: "w"}
		for _, c := range []struct {
			claim frontend.Claim
			name  string
			code  jobs.Code
		}{
			{frontend.Claim{RunID: res.RunID, Fence: claim.Fence + 1, WorkerID: "w"}, "guarded", jobs.CodeJobLeaseLost},
			{frontend.Claim{RunID: res.RunID, Fence: claim.Fence, WorkerID: "other"}, "guarded", jobs.CodeJobLeaseLost},
			{claim, "another-backfill", jobs.CodeBadRequest},
			{claim, "", jobs.CodeBadRequest},
			{frontend.Claim{RunID: "no-such-run", Fence: 1, WorkerID: "w"}, "guarded", jobs.CodeRunNotFound},
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
			"stale fence":   {Claim: frontend.Claim{RunID: res.RunID, Fence: claim.Fence - 1, WorkerID: "w"}, Rows: 9, Batches: 2},
			"NUL cursor":    {Claim: claim, Rows: 9, Batches: 2, Cursor: "\x00"},
		} {
			if err := report(r); err == nil || jobs.CodeOf(err) == "" {
				t.Errorf("%s: %v; want a refusal with a code", name, err)
			}
		}
		rows := ledger(t, env, "guarded")
		if len(rows) != 1 || rows[0].Rows != 7 || rows[0].Cursor != "[7]" || rows[0].Status != "running" {
			t.Fatalf("after refused reports: %+v; want 7 rows, cursor [7]", rows)
		}
		if _, err := env.Engine.Cancel(ctx, res.RunID, "test"); err != nil {
			t.Fatal(err)
		}
		if err := report(frontend.BackfillReportRequest{Claim: claim, Rows: 9, Batches: 2}); !jobs.HasCode(err, jobs.CodeAborted) {
			t.Fatalf("report on a cancelled run: %v; want X_ABORTED", err)
		}
		if rows := ledger(t, env, "guarded"); rows[0].Status != backfill.StatusFailed || rows[0].Rows != 7 {
			t.Fatalf("a cancelled pass's row reads %+v; want failed (from its run) at 7 rows", rows[0])
		}
	})
}
