package jobs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// A call name may be as long as any name the engine keeps (jobs.MaxIdentifier bytes), but the id
// of its effect adds the run's id: a child start, a durable enqueue or a publish under a name of
// more than about 950 bytes made an id past the limit, and its record was refused with
// "dedupeId is … bytes", naming a field the caller never set. Such an id is now the call's prefix
// and a digest of its name, so the call is carried out, once, and a resend finds the same effect.
func TestALongCallNameIsCarriedOut(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			ctx := t.Context()
			testenv.Declare(t, env.Engine, "w", testenv.Untyped("lc", "lcq"), testenv.Untyped("lk", "lkq"))
			_, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "lc", Queue: "lcq", Key: "p", NoTenant: true})
			if err != nil {
				t.Fatal(err)
			}
			var task frontend.Task
			for i := 0; i < 1000 && task.RunID == ""; i++ {
				tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"lcq"}, Max: 1})
				if err != nil {
					t.Fatal(err)
				}
				if len(tasks) == 1 {
					task = tasks[0]
				}
				time.Sleep(2 * time.Millisecond)
			}
			long := strings.Repeat("n", jobs.MaxIdentifier-10)
			payload, _ := jobs.Encode(map[string]string{"id": "x"})
			calls := []frontend.Command{
				{Kind: frontend.CmdPublish, Name: long + "-pub", Event: "long.call", Output: payload},
				{Kind: frontend.CmdEnqueue, Name: long + "-kid", Effect: &frontend.Effect{Job: "lk", Queue: "lkq", Key: "k", NoTenant: true, Child: true, Detached: true}},
			}
			send := func(retry bool) frontend.RecordResponse {
				t.Helper()
				r, err := env.Engine.Record(ctx, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w",
					LeaseToken: task.LeaseToken, AfterSeq: task.LastSeq, Retry: retry, Commands: calls})
				if err != nil {
					t.Fatalf("a record of calls named %d bytes: %v", len(long)+4, err)
				}
				return r
			}
			r := send(false)
			var ids []string
			for _, ev := range r.Appended {
				p, err := ev.Decode()
				if err != nil {
					t.Fatal(err)
				}
				switch p := p.(type) {
				case history.EventPublished:
					ids = append(ids, p.EventID)
				case history.ChildEnqueued:
					ids = append(ids, p.RunID)
				}
			}
			if len(ids) != 2 || len(ids[0]) > jobs.MaxIdentifier {
				t.Fatalf("the record appended %v (ids %q)", testenv.Kinds(r.Appended), ids)
			}
			send(true) // a resend of the landed record: the same effects, no second child
			if kids, err := env.Engine.ListRuns(ctx, store.ListParams{Job: "lk"}); err != nil || len(kids) != 1 || kids[0].ID != ids[1] {
				t.Fatalf("children %v (%v); want the one run %s", kids, err, ids[1])
			}
		})
	}
}
