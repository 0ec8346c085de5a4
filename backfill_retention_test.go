package jobs_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// A pass whose run completed while its own final report was lost (its worker died, the ledger
// was away) reads completed, and stays completed once retention deleted its run, whether the
// ledger was read before the sweep or not: the ledger is kept for ever so that a gate asking for
// a completed pass of a name is answered however old the pass. Retention's deletion made the row
// read "the run no longer exists", failed, and the name pending again.
func TestACompletedPassStaysCompletedAfterRetention(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		for _, readFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/read-before-the-sweep=%v", b.Name, readFirst), func(t *testing.T) {
				completedPassAfterRetention(t, b.Open(t), readFirst)
			})
		}
	}
}

func completedPassAfterRetention(t *testing.T, st store.Store, readFirst bool) {
	env := testenv.Start(t, testenv.Options{Store: st, Retention: engine.RetentionConfig{Every: 10_000 * time.Hour}})
	ctx := t.Context()
	const name = "kept-pass"
	res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: name, Key: "k", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Declare(t, env.Engine, "w1", testenv.Untyped(name, jobs.DefaultQueue))
	tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w1", Queues: []string{jobs.DefaultQueue}, Max: 1, Wait: time.Second})
	if err != nil || len(tasks) != 1 || tasks[0].RunID != res.RunID {
		t.Fatalf("poll: %v, %+v", err, tasks)
	}
	task := tasks[0]
	claim := frontend.Claim{RunID: res.RunID, Fence: task.Fence, WorkerID: "w1", LeaseToken: task.LeaseToken}
	if _, err := env.Engine.BackfillOpen(ctx, frontend.BackfillOpenRequest{Claim: claim, Name: name, Checksum: "sum", Total: -1}); err != nil {
		t.Fatal(err)
	}
	if err := env.Engine.BackfillReport(ctx, frontend.BackfillReportRequest{Claim: claim, Rows: 7, Batches: 1, Cursor: "[7]"}); err != nil {
		t.Fatal(err)
	}
	out, _ := jobs.Encode("done")
	// The run completes; the pass's final report never arrived.
	if _, err := env.Engine.Record(ctx, frontend.RecordRequest{RunID: res.RunID, Fence: task.Fence, WorkerID: "w1",
		LeaseToken: task.LeaseToken, AfterSeq: task.LastSeq,
		Commands: []frontend.Command{{Kind: frontend.CmdComplete, Output: out}}}); err != nil {
		t.Fatal(err)
	}
	status := func() string {
		t.Helper()
		p, err := env.Engine.InspectBackfills(ctx, store.BackfillFilter{Name: name})
		if err != nil || len(p) != 1 {
			t.Fatalf("ledger: %+v, %v", p, err)
		}
		return p[0].Status
	}
	if readFirst {
		if st := status(); st != backfill.StatusCompleted {
			t.Fatalf("the pass before retention reads %s; want completed (its run completed)", st)
		}
	}
	env.Fake().Advance(engine.DefaultRetention + time.Hour)
	if rep, err := env.Engine.SweepRetention(ctx, false); err != nil || rep.Runs != 1 {
		t.Fatalf("sweep: %+v, %v", rep, err)
	}
	if st := status(); st != backfill.StatusCompleted {
		t.Errorf("the same pass after retention deleted its run reads %s; want still completed", st)
	}
}
