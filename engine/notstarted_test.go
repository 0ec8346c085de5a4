package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// An engine whose Start was forgotten says so when a worker records, rather than that it is
// stopping.
func TestARecordToAnEngineNeverStartedSaysSo(t *testing.T) {
	t.Parallel()
	eng, err := engine.New(engine.Config{Store: memory.New(), AllowUndeclared: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	testenv.Declare(t, eng, "w", testenv.Untyped("j", jobs.DefaultQueue))
	res, err := eng.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Key: "k", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := eng.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{jobs.DefaultQueue}, Max: 1, Wait: time.Second})
	if err != nil || len(tasks) != 1 || tasks[0].RunID != res.RunID {
		t.Fatalf("poll: %+v %v", tasks, err)
	}
	tk := tasks[0]
	_, err = eng.Record(ctx, frontend.RecordRequest{RunID: tk.RunID, Fence: tk.Fence, WorkerID: "w", LeaseToken: tk.LeaseToken,
		AfterSeq: tk.LastSeq, Commands: []frontend.Command{{Kind: frontend.CmdStep, Name: "s", Output: []byte{0xc0}}}})
	if !jobs.HasCode(err, jobs.CodeDraining) || !strings.Contains(err.Error(), "never started") {
		t.Fatalf("record to an engine never started: %v; want X_DRAINING saying it was never started", err)
	}
}
