package api_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/store"
)

// TestEngineChecksRecordsAgainstHistory: under a valid claim, the engine still refuses every
// command its history or its bounds contradict, and a refusal writes nothing.
func TestEngineChecksRecordsAgainstHistory(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	ctx := context.Background()
	task := claimOne(t, b, b.client, "w", "j", "q")
	rec := func(after int64, cmds ...frontend.Command) (frontend.RecordResponse, error) {
		return b.client.Record(ctx, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w",
			LeaseToken: task.LeaseToken, AfterSeq: after, Commands: cmds})
	}
	nilOut := []byte{0xc0}
	step := func(name string) frontend.Command {
		return frontend.Command{Kind: frontend.CmdStep, Name: name, Output: nilOut}
	}
	resp, err := rec(1, step("a"))
	if err != nil || resp.LastSeq != 2 {
		t.Fatalf("first step: %+v %v", resp, err)
	}
	now := b.env.Clock.Now()
	nan, _ := msgpack.Marshal(math.NaN())
	inf, _ := msgpack.Marshal(map[string]any{"x": math.Inf(1)})
	badUTF8 := []byte{0xa2, 0xff, 0xfe}
	empties := make([]string, 10_000)
	cases := []struct {
		name  string
		after int64
		cmds  []frontend.Command
		code  jobs.Code
	}{
		{"a step name already recorded", 2, []frontend.Command{step("a")}, jobs.CodeStepDuplicate},
		{"one name twice in a record", 2, []frontend.Command{step("b"), step("b")}, jobs.CodeStepDuplicate},
		{"a sleep named like a recorded step", 2, []frontend.Command{{Kind: frontend.CmdSleep, Name: "a", WakeAt: now.Add(time.Minute)}}, jobs.CodeStepDuplicate},
		{"a stale after_seq", 1, []frontend.Command{step("c")}, jobs.CodeHistoryStale},
		{"an after_seq from the future", 9, []frontend.Command{step("c")}, jobs.CodeHistoryStale},
		{"no after_seq", 0, []frontend.Command{step("c")}, jobs.CodeBadRequest},
		{"a wake time in year 9999", 2, []frontend.Command{{Kind: frontend.CmdSleep, Name: "s", WakeAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}}, jobs.CodeBadRequest},
		{"a wake time in year 1", 2, []frontend.Command{{Kind: frontend.CmdSleep, Name: "s", WakeAt: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)}}, jobs.CodeBadRequest},
		{"a wait timeout in year 9999", 2, []frontend.Command{{Kind: frontend.CmdWait, Name: "w", Event: "e", TimeoutAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}}, jobs.CodeBadRequest},
		{"a retry time in year 1", 2, []frontend.Command{{Kind: frontend.CmdFail, Attempt: 1, Error: "x", RetryAt: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)}}, jobs.CodeBadRequest},
		{"attempt -1000", 2, []frontend.Command{{Kind: frontend.CmdFail, Attempt: -1000, Error: "x", Stop: "terminal"}}, jobs.CodeBadRequest},
		{"an attempt the run is not on", 2, []frontend.Command{{Kind: frontend.CmdFail, Attempt: 7, Error: "x", Stop: "terminal"}}, jobs.CodeBadRequest},
		{"an unknown stop", 2, []frontend.Command{{Kind: frontend.CmdFail, Attempt: 1, Error: "x", Stop: "whenever"}}, jobs.CodeBadRequest},
		{"a step output that is not msgpack", 2, []frontend.Command{{Kind: frontend.CmdStep, Name: "c", Output: []byte{0xc1}}}, jobs.CodeEncoding},
		{"a step output with trailing bytes", 2, []frontend.Command{{Kind: frontend.CmdStep, Name: "c", Output: []byte{0xc0, 0xc0}}}, jobs.CodeEncoding},
		{"a NaN result", 2, []frontend.Command{{Kind: frontend.CmdComplete, Output: nan}}, jobs.CodeEncoding},
		{"an infinite field", 2, []frontend.Command{{Kind: frontend.CmdStep, Name: "c", Output: inf}}, jobs.CodeEncoding},
		{"an output string that is not UTF-8", 2, []frontend.Command{{Kind: frontend.CmdStep, Name: "c", Output: badUTF8}}, jobs.CodeEncoding},
		{"10,000 empty match strings", 2, []frontend.Command{{Kind: frontend.CmdWait, Name: "w", Event: "e", Match: empties, TimeoutAt: now.Add(time.Hour)}}, jobs.CodeBadRequest},
		{"an unsorted match", 2, []frontend.Command{{Kind: frontend.CmdWait, Name: "w", Event: "e", Match: []string{"b=1", "a=1"}, TimeoutAt: now.Add(time.Hour)}}, jobs.CodeBadRequest},
		{"a match pair without =", 2, []frontend.Command{{Kind: frontend.CmdWait, Name: "w", Event: "e", Match: []string{"ab"}, TimeoutAt: now.Add(time.Hour)}}, jobs.CodeBadRequest},
		{"a wait for no event", 2, []frontend.Command{{Kind: frontend.CmdWait, Name: "w", TimeoutAt: now.Add(time.Hour)}}, jobs.CodeBadRequest},
		{"a step without a name", 2, []frontend.Command{{Kind: frontend.CmdStep, Output: nilOut}}, jobs.CodeBadRequest},
	}
	for _, c := range cases {
		if _, err := rec(c.after, c.cmds...); !jobs.HasCode(err, c.code) {
			t.Fatalf("%s: %v, want %s", c.name, err, c.code)
		}
		run, err := b.env.Engine.GetRun(ctx, task.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if run.State != store.StateRunning || run.LastSeq != 2 || run.Attempt != 1 {
			t.Fatalf("%s was refused, yet the run is %s at seq %d, attempt %d", c.name, run.State, run.LastSeq, run.Attempt)
		}
		if _, ok, _ := b.env.Store.TimerNext(ctx); ok {
			t.Fatalf("%s was refused, yet a timer is armed", c.name)
		}
	}
	// And the run still takes what is right.
	if resp, err := rec(2, step("b"), frontend.Command{Kind: frontend.CmdComplete, Output: nilOut}); err != nil || resp.State != string(store.StateCompleted) {
		t.Fatalf("a sound record: %+v %v", resp, err)
	}
}
