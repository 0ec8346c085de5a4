package engine_test

import (
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// A heartbeat carries at most frontend.MaxHeartbeatLeases leases (a worker holding more sends
// several): the engine refuses a larger one whole, X_BAD_REQUEST, and renews none of its leases,
// valid ones included. One at the bound is answered lease by lease. The bound was stated and
// never applied: the wire's check lets a body carry four times as many, each checked, renewed and
// answered in one request.
func TestAHeartbeatPastItsLeaseBoundIsRefused(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	ctx := t.Context()
	testenv.Declare(t, env.Engine, "w", testenv.Untyped("j", "q"))
	if _, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Queue: "q", Key: "k", NoTenant: true}); err != nil {
		t.Fatal(err)
	}
	tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 1})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("poll: %d tasks, %v", len(tasks), err)
	}
	task := tasks[0]
	leases := func(n int) []frontend.Lease {
		out := make([]frontend.Lease, n)
		out[0] = frontend.Lease{RunID: task.RunID, Fence: task.Fence, Token: task.LeaseToken}
		for i := 1; i < n; i++ {
			out[i] = frontend.Lease{RunID: "no-such-run", Fence: 1, Token: "forged"}
		}
		return out
	}
	env.Advance(time.Second)
	_, err = env.Engine.Heartbeat(ctx, frontend.HeartbeatRequest{WorkerID: "w", Leases: leases(frontend.MaxHeartbeatLeases + 1)})
	if !jobs.HasCode(err, jobs.CodeBadRequest) {
		t.Fatalf("a heartbeat of %d leases: %v, want %s", frontend.MaxHeartbeatLeases+1, err, jobs.CodeBadRequest)
	}
	if run, err := env.Engine.GetRun(ctx, task.RunID); err != nil || !run.LeaseUntil.Equal(task.LeaseUntil) {
		t.Fatalf("the refused heartbeat renewed the claim: lease until %s, was %s (%v)", run.LeaseUntil, task.LeaseUntil, err)
	}
	resp, err := env.Engine.Heartbeat(ctx, frontend.HeartbeatRequest{WorkerID: "w", Leases: leases(frontend.MaxHeartbeatLeases)})
	if err != nil || len(resp.Codes) != frontend.MaxHeartbeatLeases || resp.Codes[0] != "" || resp.Codes[1] != string(jobs.CodeLeaseInvalid) {
		t.Fatalf("a heartbeat at the bound: %d codes (%v), %v", len(resp.Codes), resp.Codes[:min(2, len(resp.Codes))], err)
	}
}
