package ui_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// Order is the input of the test's job.
type Order struct {
	ID   string `json:"id"`
	Mode string `json:"mode"` // ok | fail | sleep
}

// ship completes two steps, then finishes as its input says: completes, fails for good (a
// terminal code, so it is dead-lettered on the first attempt) or sleeps an hour.
var ship = jobs.MustDefine("ship",
	func(in Order) string { return in.ID },
	jobs.TenantFrom(func(Order) string { return "acme" }),
	func(ctx *jobs.Ctx, in Order) (string, error) {
		for _, name := range []string{"reserve", "charge"} {
			if _, err := jobs.Step(ctx, name, func(context.Context) (string, error) { return name + ":" + in.ID, nil }); err != nil {
				return "", err
			}
		}
		switch in.Mode {
		case "fail":
			return "", jobs.Errorf(jobs.CodeBadRequest, "card declined for order %s", in.ID)
		case "sleep":
			if err := jobs.SleepFor(ctx, time.Hour); err != nil {
				return "", err
			}
		}
		return "shipped " + in.ID, nil
	},
	jobs.Queue("orders"),
)

// seeded names one run in every state.
type seeded map[store.State]string

// seed makes one run in every state on env: completed, failed and suspended by a real worker
// running ship; ready, delayed, running, blocked and cancelled on the queue "manual", which no
// worker polls, driven through the engine's worker seam (frontend) the way a worker drives it.
func seed(t *testing.T, env *testenv.Env) seeded {
	t.Helper()
	ctx := context.Background()
	out := seeded{}
	env.Worker(worker.Config{}, ship)
	for mode, want := range map[string]store.State{"ok": store.StateCompleted, "fail": store.StateFailed, "sleep": store.StateSuspended} {
		res, err := ship.Enqueue(ctx, env.Engine, Order{ID: "order-" + mode, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		env.Await(res.RunID, want)
		out[want] = res.RunID
	}
	enqueue := func(n int, delay time.Duration) string {
		in, err := jobs.Encode(map[string]any{"n": n, "note": "manual run"})
		if err != nil {
			t.Fatal(err)
		}
		res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "import", Queue: "manual", Input: in,
			Key: fmt.Sprintf("import-%d", n), Tenant: "globex", EnqueuedBy: "seed", Delay: delay})
		if err != nil {
			t.Fatal(err)
		}
		return res.RunID
	}
	testenv.Declare(t, env.Engine, "manual-worker", testenv.UntypedTenanted("import", "manual"))
	claim := func() frontend.Task {
		tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "manual-worker", Queues: []string{"manual"}, Max: 1})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("poll manual: %v %v", tasks, err)
		}
		return tasks[0]
	}
	out[store.StateRunning] = enqueue(1, 0)
	claim()
	out[store.StateBlocked] = enqueue(2, 0)
	task := claim()
	out2, _ := jobs.Encode("rows: 42")
	if _, err := env.Engine.Record(ctx, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "manual-worker", LeaseToken: task.LeaseToken,
		AfterSeq: task.LastSeq, Commands: []frontend.Command{{Kind: frontend.CmdStep, Name: "load", Output: out2},
			{Kind: frontend.CmdBlock, Code: string(jobs.CodeReplayDiverged), Error: "history has step \"load\", the code calls \"fetch\""}}}); err != nil {
		t.Fatal(err)
	}
	out[store.StateCancelled] = enqueue(3, 0)
	if _, err := env.Engine.Cancel(ctx, out[store.StateCancelled], "seeded"); err != nil {
		t.Fatal(err)
	}
	out[store.StateReady] = enqueue(4, 0)
	out[store.StateDelayed] = enqueue(5, time.Hour)
	for st, id := range out {
		env.Await(id, st)
	}
	return out
}

// serve puts the API server (and so the console) over env on a loopback port.
func serve(t *testing.T, env *testenv.Env, token string) string {
	t.Helper()
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Token: token, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)
	return ts.URL
}
