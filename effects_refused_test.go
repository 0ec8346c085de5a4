package jobs_test

import (
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// A record that enqueues or publishes and is then refused changes nothing: the engine checks the
// whole record, and the history it follows, before it carries out any effect. Each record below
// holds a valid enqueue and a publish followed by a command the engine refuses; the enqueue's
// run must not exist after the refusal.
func TestRefusedRecordCarriesOutNoEffect(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  func(env *testenv.Env, task frontend.Task) []frontend.Command
		code jobs.Code
	}{
		{"a sleep past the horizon", func(env *testenv.Env, _ frontend.Task) []frontend.Command {
			return []frontend.Command{{Kind: frontend.CmdSleep, Name: "nap", WakeAt: env.Clock.Now().AddDate(500, 0, 0)}}
		}, jobs.CodeBadRequest},
		{"a step named twice", func(*testenv.Env, frontend.Task) []frontend.Command {
			return []frontend.Command{{Kind: frontend.CmdStep, Name: "twice", Output: []byte{0xc0}},
				{Kind: frontend.CmdStep, Name: "twice", Output: []byte{0xc0}}}
		}, jobs.CodeStepDuplicate},
		{"an enqueue naming no run", func(*testenv.Env, frontend.Task) []frontend.Command {
			return []frontend.Command{{Kind: frontend.CmdEnqueue, Name: "empty"}}
		}, jobs.CodeBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testenv.Start(t, testenv.Options{Store: memory.New()})
			parent := syncJob()
			testenv.Declare(t, env.Engine, "w", parent)
			enqueue(t, env, parent, syncInput{Customer: "a"})
			tasks := pollAll(t, env.Engine, "w")
			if len(tasks) != 1 {
				t.Fatalf("claimed %d runs, want 1", len(tasks))
			}
			task := tasks[0]
			in, _ := jobs.Encode(syncInput{Customer: "a", N: 99})
			cmds := []frontend.Command{
				{Kind: frontend.CmdEnqueue, Name: "spawn", Effect: &frontend.Effect{Job: "sync", Queue: "sync", Key: "child-99", Tenant: "a", Input: in}},
				{Kind: frontend.CmdPublish, Name: "tell", Event: "told", Output: []byte{0xc0}},
			}
			_, err := env.Engine.Record(t.Context(), frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w",
				LeaseToken: task.LeaseToken, AfterSeq: task.LastSeq, Commands: append(cmds, tc.bad(env, task)...)})
			if !jobs.HasCode(err, tc.code) {
				t.Fatalf("record: %v, want %s", err, tc.code)
			}
			runs, err := env.Engine.ListRuns(t.Context(), store.ListParams{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range runs {
				if r.Key == "child-99" {
					t.Fatalf("the refused record created run %s (%s)", r.ID, r.State)
				}
			}
		})
	}
}
