package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// claimOne enqueues a run of job j on queue q and claims it over HTTP as worker.
func claimOne(t *testing.T, b *bundle, c *api.Client, worker, job, queue string) frontend.Task {
	t.Helper()
	ctx := context.Background()
	if _, err := b.env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: job, Queue: queue, Key: "k-" + job, NoTenant: true}); err != nil {
		t.Fatal(err)
	}
	testenv.Declare(t, c, worker, testenv.Untyped(job, queue))
	tasks, err := c.Poll(ctx, frontend.PollRequest{WorkerID: worker, Queues: []string{queue}, Max: 1})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %v %v", tasks, err)
	}
	return tasks[0]
}

// unchanged fails unless the run is still running under the claim's fence for worker, with its
// history as the claim left it.
func unchanged(t *testing.T, b *bundle, task frontend.Task, worker string) {
	t.Helper()
	run, err := b.env.Engine.GetRun(context.Background(), task.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.State != store.StateRunning || run.Fence != task.Fence || run.WorkerID != worker ||
		run.LastSeq != task.LastSeq || !run.LeaseUntil.Equal(task.LeaseUntil) {
		t.Fatalf("run changed: %s fence %d worker %q seq %d lease %s; want running, fence %d, %q, seq %d, lease %s",
			run.State, run.Fence, run.WorkerID, run.LastSeq, run.LeaseUntil, task.Fence, worker, task.LastSeq, task.LeaseUntil)
	}
}

// TestSecondWorkerCannotTouchAnothersClaim: a worker holding a valid credential, knowing the run
// id and its fence (the admin API shows both), cannot complete, renew or hand back a run another
// worker claimed, and its attempts write nothing.
func TestSecondWorkerCannotTouchAnothersClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{Token: "admin", Credentials: []api.Credential{
		{Token: "worker-a-tok", Role: api.RoleWorker}, {Token: "worker-b-tok", Role: api.RoleWorker}}})
	ctx := context.Background()
	first, err := api.NewClient(b.url, "worker-a-tok")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	task := claimOne(t, b, first, "worker-a", "j", "q")
	if task.LeaseToken == "" {
		t.Fatal("the claim carries no lease token")
	}

	// The admin API shows the run, its fence and its worker, and never the token.
	st, _, body := b.call(t, http.MethodGet, "/v1/runs/"+task.RunID, "", "admin", nil)
	if st != http.StatusOK || strings.Contains(string(body), task.LeaseToken) {
		t.Fatalf("GET run = %d %s (token %s)", st, body, task.LeaseToken)
	}

	second, err := api.NewClient(b.url, "worker-b-tok") // a valid worker credential of its own
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	complete := []frontend.Command{{Kind: frontend.CmdComplete, Output: []byte{0xc0}}}
	release := []frontend.Command{{Kind: frontend.CmdRelease}}
	forged := []frontend.RecordRequest{
		// No token at all, under the real fence and the real worker id.
		{RunID: task.RunID, Fence: task.Fence, WorkerID: "worker-a", AfterSeq: task.LastSeq, Commands: complete},
		// The first worker's token presented under the second worker's id.
		{RunID: task.RunID, Fence: task.Fence, WorkerID: "worker-b", LeaseToken: task.LeaseToken, AfterSeq: task.LastSeq, Commands: complete},
		// A guessed token.
		{RunID: task.RunID, Fence: task.Fence, WorkerID: "worker-a", LeaseToken: strings.Repeat("A", len(task.LeaseToken)), AfterSeq: task.LastSeq, Commands: complete},
		// A release (hand-back) without the token.
		{RunID: task.RunID, Fence: task.Fence, WorkerID: "worker-b", AfterSeq: task.LastSeq, Commands: release},
		// The token of fence 1 with another fence.
		{RunID: task.RunID, Fence: task.Fence + 1, WorkerID: "worker-a", LeaseToken: task.LeaseToken, AfterSeq: task.LastSeq, Commands: complete},
	}
	for i, req := range forged {
		if _, err := second.Record(ctx, req); !jobs.HasCode(err, jobs.CodeLeaseInvalid) {
			t.Fatalf("forged record %d: %v, want X_LEASE_INVALID", i, err)
		}
		unchanged(t, b, task, "worker-a")
	}
	for i, l := range []frontend.Lease{
		{RunID: task.RunID, Fence: task.Fence},
		{RunID: task.RunID, Fence: task.Fence, Token: task.LeaseToken}, // sent as worker-b
	} {
		resp, err := second.Heartbeat(ctx, frontend.HeartbeatRequest{WorkerID: "worker-b", Leases: []frontend.Lease{l}})
		if err != nil || len(resp.Codes) != 1 || resp.Codes[0] != string(jobs.CodeLeaseInvalid) {
			t.Fatalf("forged heartbeat %d: %+v %v, want X_LEASE_INVALID", i, resp, err)
		}
		unchanged(t, b, task, "worker-a")
	}

	// The rightful holder still completes it.
	resp, err := first.Record(ctx, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "worker-a",
		LeaseToken: task.LeaseToken, AfterSeq: task.LastSeq, Commands: complete})
	if err != nil || resp.State != string(store.StateCompleted) {
		t.Fatalf("the holder's completion: %+v %v", resp, err)
	}
}

// TestSecondWorkerCannotWriteAnothersBackfillLedger: the backfill ledger calls are worker writes
// like a record. Run, fence and worker id are on any viewer's screen, so a second worker
// credential presenting them (without the claim's lease token, or with it under another fence)
// must neither open nor report the pass: a forged "completed" would make every later pass of that
// backfill a no-op and let the migrations gated on it go ahead. The refusals write nothing, on the
// live run and on a cancelled one, and the holder's own calls still land.
func TestSecondWorkerCannotWriteAnothersBackfillLedger(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{Token: "admin", Credentials: []api.Credential{
		{Token: "worker-a-tok", Role: api.RoleWorker}, {Token: "worker-b-tok", Role: api.RoleWorker}}})
	ctx := context.Background()
	first, err := api.NewClient(b.url, "worker-a-tok")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := api.NewClient(b.url, "worker-b-tok")
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	task := claimOne(t, b, first, "worker-a", "sweep", "q")
	holder := frontend.Claim{RunID: task.RunID, Fence: task.Fence, WorkerID: "worker-a", LeaseToken: task.LeaseToken}
	if _, err := first.BackfillOpen(ctx, frontend.BackfillOpenRequest{Claim: holder, Name: "sweep", Checksum: "c", Total: 100}); err != nil {
		t.Fatalf("the holder's open: %v", err)
	}
	forged := []frontend.Claim{
		{RunID: task.RunID, Fence: task.Fence, WorkerID: "worker-a"},                                                        // no token
		{RunID: task.RunID, Fence: task.Fence, WorkerID: "worker-a", LeaseToken: strings.Repeat("A", len(task.LeaseToken))}, // a guess
		{RunID: task.RunID, Fence: task.Fence + 1, WorkerID: "worker-a", LeaseToken: task.LeaseToken},                       // another fence
		{RunID: task.RunID, Fence: task.Fence, WorkerID: "worker-b", LeaseToken: task.LeaseToken},                           // another worker
	}
	row := func() store.Backfill {
		t.Helper()
		rows, err := b.env.Store.BackfillList(ctx, store.BackfillFilter{RunID: task.RunID})
		if err != nil || len(rows) != 1 {
			t.Fatalf("ledger: %+v %v", rows, err)
		}
		return rows[0]
	}
	check := func(when string) {
		t.Helper()
		for i, c := range forged {
			if _, err := second.BackfillOpen(ctx, frontend.BackfillOpenRequest{Claim: c, Name: "sweep", Checksum: "c", Total: 1, Force: true}); !jobs.HasCode(err, jobs.CodeLeaseInvalid) {
				t.Fatalf("%s: forged open %d: %v; want X_LEASE_INVALID", when, i, err)
			}
			for _, status := range []string{"", store.BackfillCompleted, store.BackfillFailed} {
				err := second.BackfillReport(ctx, frontend.BackfillReportRequest{Claim: c, Rows: 1, Batches: 1, Status: status})
				if !jobs.HasCode(err, jobs.CodeLeaseInvalid) {
					t.Fatalf("%s: forged report %d (status %q): %v; want X_LEASE_INVALID", when, i, status, err)
				}
			}
		}
		if r := row(); r.Status != store.BackfillRunning || r.Rows != 0 || r.Batches != 0 || r.Total != 100 {
			t.Fatalf("%s: the forged calls moved the row: %+v", when, r)
		}
	}
	check("live run")
	if err := first.BackfillReport(ctx, frontend.BackfillReportRequest{Claim: holder, Rows: 0, Batches: 0}); err != nil {
		t.Fatalf("the holder's report: %v", err)
	}
	if _, err := b.env.Engine.Cancel(ctx, task.RunID, "stop"); err != nil {
		t.Fatal(err)
	}
	// The cancel settles the row failed; a forged end after it changes nothing either.
	for i, c := range forged {
		if err := second.BackfillReport(ctx, frontend.BackfillReportRequest{Claim: c, Rows: 1, Batches: 1, Status: store.BackfillCompleted}); !jobs.HasCode(err, jobs.CodeLeaseInvalid) {
			t.Fatalf("cancelled run: forged end %d: %v; want X_LEASE_INVALID", i, err)
		}
	}
	if r := row(); r.Status != store.BackfillFailed || r.Rows != 0 {
		t.Fatalf("cancelled run: the row reads %+v; want failed at 0 rows", r)
	}
}
