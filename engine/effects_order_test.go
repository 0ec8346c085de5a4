package engine_test

import (
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// A record whose second effect the engine refuses carries out none of its effects: the first
// enqueue's run is not created. Each effect's own checks (a publish's event name, payload and
// match; an enqueue's job, key and tenancy against the manifest; an await's child) are made
// before any effect of the record is carried out. Before, they were made as each effect was
// carried out, so the effects ahead of the refused one were done and stayed, for a record the
// run's history never shows.
func TestARecordRefusedForALaterEffectCarriesOutNoEarlierOne(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		bad  frontend.Command
		code jobs.Code
	}{
		{"a publish of the engine's own event", frontend.Command{Kind: frontend.CmdPublish, Name: "forge", Event: jobs.ChildEvent,
			Output: []byte{0x80}}, jobs.CodeBadRequest},
		{"a publish with no call name", frontend.Command{Kind: frontend.CmdPublish, Event: "told", Output: []byte{0xc0}}, jobs.CodeBadRequest},
		{"a publish of an event with no name", frontend.Command{Kind: frontend.CmdPublish, Name: "tell", Output: []byte{0xc0}}, jobs.CodeBadRequest},
		{"a publish whose payload is not msgpack", frontend.Command{Kind: frontend.CmdPublish, Name: "tell", Event: "told",
			Output: []byte{0xc1}}, jobs.CodeBadRequest},
		{"a matched publish whose pairs are unsorted", frontend.Command{Kind: frontend.CmdPublish, Name: "tell", Event: "told",
			Output: []byte{0xc0}, Matched: true, Match: []string{"b=1", "a=1"}}, jobs.CodeBadRequest},
		{"an enqueue of an undeclared job", frontend.Command{Kind: frontend.CmdEnqueue, Name: "ghost",
			Effect: &frontend.Effect{Job: "ghost", Key: "g", NoTenant: true}}, jobs.CodeJobUndeclared},
		{"an enqueue naming a tenant for a no-tenant job", frontend.Command{Kind: frontend.CmdEnqueue, Name: "tenanted",
			Effect: &frontend.Effect{Job: "child", Queue: "q", Key: "t", Tenant: "acme"}}, jobs.CodeJobTenantMismatch},
		{"an enqueue with no key", frontend.Command{Kind: frontend.CmdEnqueue, Name: "nokey",
			Effect: &frontend.Effect{Job: "child", Queue: "q", NoTenant: true}}, jobs.CodeJobIdempotencyRequired},
		{"an await of a run that is not its child", frontend.Command{Kind: frontend.CmdAwaitChild, Name: "await",
			Effect: &frontend.Effect{RunID: "0190f0a0-0000-7000-8000-000000000000"}}, jobs.CodeNotChild},
		{"an await naming no run", frontend.Command{Kind: frontend.CmdAwaitChild, Name: "await"}, jobs.CodeBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t, testenv.Options{Store: memory.New(), RequireDeclared: true})
			ctx := t.Context()
			testenv.Declare(t, env.Engine, "w", testenv.Untyped("parent", "q"), testenv.Untyped("child", "q"))
			if _, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "parent", Queue: "q", Key: "p", NoTenant: true}); err != nil {
				t.Fatal(err)
			}
			tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 1})
			if err != nil || len(tasks) != 1 {
				t.Fatalf("poll: %d tasks, %v", len(tasks), err)
			}
			task := tasks[0]
			cmds := []frontend.Command{
				{Kind: frontend.CmdEnqueue, Name: "spawn", Effect: &frontend.Effect{Job: "child", Queue: "q", Key: "spawned", NoTenant: true}},
				tc.bad,
			}
			_, err = env.Engine.Record(ctx, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w",
				LeaseToken: task.LeaseToken, AfterSeq: task.LastSeq, Commands: cmds})
			if !jobs.HasCode(err, tc.code) {
				t.Fatalf("record: %v, want %s", err, tc.code)
			}
			runs, err := env.Engine.ListRuns(ctx, store.ListParams{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range runs {
				if r.Key == "spawned" {
					t.Fatalf("the refused record created run %s (%s)", r.ID, r.State)
				}
			}
			run, err := env.Engine.GetRun(ctx, task.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if run.State != store.StateRunning || run.Fence != task.Fence || run.LastSeq != task.LastSeq {
				t.Fatalf("the refused record changed the run: %s fence %d seq %d", run.State, run.Fence, run.LastSeq)
			}
		})
	}
}
