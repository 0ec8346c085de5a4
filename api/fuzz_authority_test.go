package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// FuzzRecordAgainstHistory sends fuzzed commands under a VALID claim (the right token, worker and
// seq), where only the engine's own checks stand between a worker and the store. It holds the
// engine to: never a 5xx, and a refusal writes nothing (the run keeps its seq, its state and its
// attempt, and arms no timer).
func FuzzRecordAgainstHistory(f *testing.F) {
	env := testenv.Start(f, testenv.Options{Store: memory.New()})
	eng := env.Engine
	ctx := context.Background()
	testenv.Declare(f, eng, "w", testenv.Untyped("j", "q"))
	n := 0
	claim := func(t *testing.T) frontend.Task {
		n++
		if _, err := eng.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Queue: "q", Key: fmt.Sprint(n), NoTenant: true}); err != nil {
			t.Fatal(err)
		}
		tasks, err := eng.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 1})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("claim: %v %v", tasks, err)
		}
		return tasks[0]
	}
	kinds := []frontend.CommandKind{frontend.CmdStep, frontend.CmdSleep, frontend.CmdWait, frontend.CmdComplete,
		frontend.CmdFail, frontend.CmdBlock, frontend.CmdRelease, "explode"}
	f.Add(uint8(0), "a", []byte{0xc0}, int64(60), int64(1), "", "a=1", uint8(1), int64(0))
	f.Add(uint8(0), "a", []byte{0xc1}, int64(0), int64(0), "", "", uint8(2), int64(1))
	f.Add(uint8(1), "s", []byte(nil), int64(1<<40), int64(1), "", "", uint8(1), int64(0))
	f.Add(uint8(2), "w", []byte(nil), int64(-1<<40), int64(1), "", "", uint8(1), int64(0))
	f.Add(uint8(2), "w", []byte(nil), int64(3600), int64(1), "", "b=1", uint8(1), int64(0))
	f.Add(uint8(4), "", []byte(nil), int64(1), int64(-1000), "", "", uint8(1), int64(0))
	f.Add(uint8(4), "", []byte(nil), int64(1), int64(1), "whenever", "", uint8(1), int64(-1))
	f.Add(uint8(3), "", []byte{0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 1}, int64(0), int64(1), "", "", uint8(1), int64(0))
	f.Fuzz(func(t *testing.T, kind uint8, name string, output []byte, wakeIn, attempt int64, stop, match string, count uint8, seqOff int64) {
		task := claim(t)
		now := env.Clock.Now()
		c := frontend.Command{Kind: kinds[int(kind)%len(kinds)], Name: name, Output: output, Event: "e",
			WakeAt: now.Add(time.Duration(wakeIn) * time.Second), TimeoutAt: now.Add(time.Duration(wakeIn) * time.Second),
			RetryAt: now.Add(time.Duration(wakeIn) * time.Second), ReadyAt: now.Add(time.Duration(wakeIn) * time.Second),
			Attempt: int(attempt), Stop: stop, Error: "e", Code: "X_E"}
		if match != "" {
			c.Match = []string{match}
		}
		cmds := make([]frontend.Command, 1+int(count)%3)
		for i := range cmds {
			cmds[i] = c
		}
		_, err := eng.Record(ctx, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w",
			LeaseToken: task.LeaseToken, AfterSeq: task.LastSeq + seqOff%3, Commands: cmds})
		if err == nil {
			return
		}
		code := jobs.CodeOf(err)
		if code == "" || StatusOf(code) >= http.StatusInternalServerError {
			t.Fatalf("%+v: a record refused with %v, not a 4xx code", cmds, err)
		}
		run, gerr := eng.GetRun(ctx, task.RunID)
		if gerr != nil {
			t.Fatal(gerr)
		}
		if run.State != store.StateRunning || run.LastSeq != task.LastSeq || run.Attempt != task.Attempt || run.Fence != task.Fence {
			t.Fatalf("%+v refused (%v), yet the run is %s at seq %d, attempt %d", cmds, err, run.State, run.LastSeq, run.Attempt)
		}
		// Hand the claim back so the next input claims a fresh run.
		if _, err := eng.Record(ctx, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w",
			LeaseToken: task.LeaseToken, AfterSeq: task.LastSeq, Commands: []frontend.Command{{Kind: frontend.CmdBlock, Error: "done"}}}); err != nil {
			t.Fatal(err)
		}
	})
}
