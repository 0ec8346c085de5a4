package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// A second worker with a valid worker credential cannot hand back a live worker's claims by
// naming its id in a worker start or stop (a release without any lease token): the first worker
// attends its session, so both are refused with X_WORKER_LIVE and the claim stays where it is.
// Once that worker is gone (its session dropped), a start under its id, which is what its
// restarted process sends, releases at once.
func TestSecondWorkerCannotReleaseALiveWorkersClaims(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{Token: "admin", Credentials: []api.Credential{
		{Token: "worker-a-tok", Role: api.RoleWorker}, {Token: "worker-b-tok", Role: api.RoleWorker}}})
	ctx := context.Background()
	g := newGatedJob()
	kt := newKillableTransport()
	first, err := api.NewClient(b.url, "worker-a-tok", api.WithHTTPClient(&http.Client{Transport: kt}))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	reg, _ := jobs.NewRegistry(g.job)
	wa, err := worker.New(worker.Config{ID: "worker-a", Frontend: first, Registry: reg, Logger: testenv.Logger(), PollWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := wa.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(g.gate)
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = wa.Stop(sctx)
	}()
	res, err := g.job.Enqueue(ctx, b.env.Engine, 1)
	if err != nil {
		t.Fatal(err)
	}
	<-g.entered
	held, err := b.env.Engine.GetRun(ctx, res.RunID)
	if err != nil || held.State != store.StateRunning || held.WorkerID != "worker-a" {
		t.Fatalf("claim: %+v %v", held, err)
	}

	second, err := api.NewClient(b.url, "worker-b-tok")
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	// The session is attended a moment after the start; until then a start is the restart case.
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := second.WorkerStart(ctx, frontend.Session{WorkerID: "worker-a"})
		if jobs.HasCode(err, jobs.CodeWorkerLive) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("forged start: %v, want X_WORKER_LIVE", err)
		}
		// Accepted before the session was attended: it released the claim; the worker's own
		// session and a fresh claim follow, so wait for the run to be held again.
		for r, _ := b.env.Engine.GetRun(ctx, res.RunID); r.WorkerID != "worker-a" || r.State != store.StateRunning; r, _ = b.env.Engine.GetRun(ctx, res.RunID) {
			if time.Now().After(deadline) {
				t.Fatalf("run not claimed again: %+v", r)
			}
			time.Sleep(20 * time.Millisecond)
		}
		held, _ = b.env.Engine.GetRun(ctx, res.RunID)
	}
	if err := second.WorkerStop(ctx, frontend.Session{WorkerID: "worker-a"}); !jobs.HasCode(err, jobs.CodeWorkerLive) {
		t.Fatalf("forged stop: %v, want X_WORKER_LIVE", err)
	}
	after, err := b.env.Engine.GetRun(ctx, res.RunID)
	if err != nil || after.State != store.StateRunning || after.WorkerID != "worker-a" || after.Fence != held.Fence || after.LastSeq != held.LastSeq {
		t.Fatalf("after the forged start and stop the run is %s for %q at fence %d seq %d; want running for worker-a at fence %d seq %d",
			after.State, after.WorkerID, after.Fence, after.LastSeq, held.Fence, held.LastSeq)
	}

	// Worker a dies: its session drops. Its restart (a start under its id) releases at once.
	kt.kill()
	deadline = time.Now().Add(5 * time.Second)
	for {
		err := second.WorkerStart(ctx, frontend.Session{WorkerID: "worker-a"})
		if err == nil {
			break
		}
		if !jobs.HasCode(err, jobs.CodeWorkerLive) || time.Now().After(deadline) {
			t.Fatalf("start after the worker died: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Released: ready, or claimed again under a new fence (a long-poll the dead worker left
	// in flight can take it before the server sees that connection closed).
	if r, _ := b.env.Engine.GetRun(ctx, res.RunID); r.State == store.StateRunning && r.Fence == after.Fence {
		t.Fatalf("the dead worker's start left the run held: %+v", r)
	}
}
