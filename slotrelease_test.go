package jobs_test

import (
	"context"
	"sync"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// hbHook calls after once, right after the store renewed a heartbeat's leases.
type hbHook struct {
	store.Store
	mu    sync.Mutex
	after func()
}

func (h *hbHook) RunHeartbeat(ctx context.Context, p store.HeartbeatParams) ([]error, error) {
	errs, err := h.Store.RunHeartbeat(ctx, p)
	h.mu.Lock()
	f := h.after
	h.after = nil
	h.mu.Unlock()
	if f != nil {
		f()
	}
	return errs, err
}

type export struct {
	Customer string `json:"customer"`
}

// A capped job's slot (the fleet cap and a keyed cap) is free as soon as its run leaves running,
// whatever races that: a heartbeat renewing the run's lease just as the run completes (the
// renewal took the freed slot again for a whole lease), or a cancel of the running run (which
// released nothing). Either way the next run of the job was handed back over a cap nobody held.
func TestASlotIsFreeOnceItsRunLeftRunning(t *testing.T) {
	t.Parallel()
	for _, cap := range []struct {
		name string
		opt  jobs.Option
	}{{"fleet", jobs.Concurrency(1)}, {"keyed", jobs.ConcurrencyBy(jobs.ByInput("customer"), 1)}} {
		for _, how := range []string{"heartbeat-races-completion", "cancel"} {
			for _, b := range testenv.Backends() {
				t.Run(cap.name+"/"+how+"/"+b.Name, func(t *testing.T) {
					h := &hbHook{Store: b.Open(t)}
					env := testenv.Start(t, testenv.Options{Store: h})
					ctx := t.Context()
					capped := jobs.MustDefine("export", func(in export) string { return in.Customer }, jobs.NoTenant[export](),
						func(*jobs.Ctx, export) (int, error) { return 0, nil }, jobs.Queue("exports"), cap.opt)
					testenv.Declare(t, env.Engine, "w", capped)
					poll := func() []frontend.Task {
						t.Helper()
						tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"exports"}, Max: 1})
						if err != nil {
							t.Fatal(err)
						}
						return tasks
					}
					if _, err := capped.Enqueue(ctx, env.Engine, export{Customer: "acme"}); err != nil {
						t.Fatal(err)
					}
					tasks := poll()
					if len(tasks) != 1 {
						t.Fatalf("first claim: %d tasks", len(tasks))
					}
					a := tasks[0]
					switch how {
					case "heartbeat-races-completion":
						done, _ := jobs.Encode(0)
						h.after = func() {
							if _, err := env.Engine.Record(ctx, frontend.RecordRequest{RunID: a.RunID, Fence: a.Fence, WorkerID: "w",
								LeaseToken: a.LeaseToken, AfterSeq: a.LastSeq, Commands: []frontend.Command{{Kind: frontend.CmdComplete, Output: done}}}); err != nil {
								t.Error(err)
							}
						}
						if _, err := env.Engine.Heartbeat(ctx, frontend.HeartbeatRequest{WorkerID: "w",
							Leases: []frontend.Lease{{RunID: a.RunID, Fence: a.Fence, Token: a.LeaseToken}}}); err != nil {
							t.Fatal(err)
						}
						if r, _ := env.Engine.GetRun(ctx, a.RunID); r.State != store.StateCompleted {
							t.Fatalf("the first run is %s; want completed", r.State)
						}
					case "cancel":
						if _, err := env.Engine.Cancel(ctx, a.RunID, "operator"); err != nil {
							t.Fatal(err)
						}
					}
					// Another customer's run under the keyed cap would not show it: the same one.
					next, err := capped.Enqueue(ctx, env.Engine, export{Customer: "acme"})
					if err != nil {
						t.Fatal(err)
					}
					if tasks := poll(); len(tasks) != 1 || tasks[0].RunID != next.RunID {
						v, _ := env.Engine.InspectRun(ctx, next.RunID)
						t.Fatalf("the next run was not claimed (%d tasks): it is %s, %q; its job holds no running run", len(tasks), v.State, v.Waiting)
					}
				})
			}
		}
	}
}
