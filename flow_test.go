package jobs_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// Claims through the engine rotate across tenants: a tenant's new run waits about one round of
// claims, not behind another tenant's backlog, even when every poll asks for one run.
func TestFairClaimsAcrossTenants(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		t.Parallel()
		ctx := t.Context()
		enqueue := func(tenant string, n, priority int) string {
			res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "import", Queue: "imports",
				Key: fmt.Sprintf("%s-%d", tenant, n), Tenant: tenant, Priority: priority})
			if err != nil {
				t.Fatal(err)
			}
			return res.RunID
		}
		for n := range 40 {
			enqueue("acme", n, 0)
		}
		env.Fake().Advance(1)
		b1, b2 := enqueue("beta", 1, 0), enqueue("beta", 2, 0)
		testenv.Declare(t, env.Engine, "w", testenv.Untyped("import", "imports"))
		at := map[string]int{}
		for i := range 6 {
			tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"imports"}, Max: 1})
			if err != nil || len(tasks) != 1 {
				t.Fatalf("poll %d: %v %v", i, tasks, err)
			}
			at[tasks[0].RunID] = i
		}
		// Runs enqueued at one instant have no order among themselves: look at beta's pair.
		first, second := at[b1], at[b2]
		if first > second {
			first, second = second, first
		}
		if _, ok := at[b1]; !ok || first > 1 {
			t.Errorf("beta's first run was claimed at poll %d, want within the first round (0 or 1)", first)
		}
		if _, ok := at[b2]; !ok || second > 3 {
			t.Errorf("beta's second run was claimed at poll %d, want by poll 3", second)
		}
	})
}

// A higher priority is claimed first within a tenant; a priority out of range is refused and
// creates nothing.
func TestPriorityOrdersClaims(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		t.Parallel()
		ctx := t.Context()
		var ids []string
		for n, p := range []int{0, -3, 7} {
			res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "mail", Queue: "mail",
				Key: fmt.Sprint(n), NoTenant: true, Priority: p})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.RunID)
			env.Fake().Advance(1)
		}
		for _, p := range []int{jobs.MaxPriority + 1, jobs.MinPriority - 1} {
			_, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "mail", Queue: "mail", Key: "bad", NoTenant: true, Priority: p})
			if jobs.CodeOf(err) != jobs.CodeBadRequest {
				t.Errorf("priority %d: %v, want %s", p, err, jobs.CodeBadRequest)
			}
		}
		testenv.Declare(t, env.Engine, "w", testenv.Untyped("mail", "mail"))
		tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"mail"}, Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tk := range tasks {
			got = append(got, tk.RunID)
		}
		if want := []string{ids[2], ids[0], ids[1]}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("claimed %v, want %v (priority 7, 0, -3)", got, want)
		}
		if runs, _ := env.Store.RunList(ctx, store.ListParams{Queue: "mail"}); len(runs) != 3 {
			t.Errorf("%d runs in the queue, want 3: a refused enqueue creates nothing", len(runs))
		}
	})
}

// A claim handed back over a cap says why: `jobs show` (RunView.Waiting) names the cap.
func TestHandedBackRunSaysWhyItWaits(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		t.Parallel()
		ctx := t.Context()
		capped := jobs.MustDefine("export", func(s any) string { return "" }, jobs.NoTenant[any](),
			func(*jobs.Ctx, any) (any, error) { return nil, nil }, jobs.Queue("exports"), jobs.Concurrency(1))
		testenv.Declare(t, env.Engine, "w", capped)
		var ids []string
		for n := range 2 {
			res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "export", Queue: "exports", Key: fmt.Sprint(n), NoTenant: true})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.RunID)
		}
		tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"exports"}, Max: 2})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("poll: %d tasks, %v; want 1 (cap 1)", len(tasks), err)
		}
		waiting := ids[0]
		if tasks[0].RunID == ids[0] {
			waiting = ids[1]
		}
		v, err := env.Engine.InspectRun(ctx, waiting)
		if err != nil {
			t.Fatal(err)
		}
		if v.State != store.StateDelayed || !strings.Contains(v.Waiting, "job_cap") || !strings.Contains(v.Waiting, `"export"`) {
			t.Errorf("the handed-back run is %s, waiting %q; want delayed, naming the job's cap", v.State, v.Waiting)
		}
		if v.Attempt != 1 {
			t.Errorf("the hand-back spent an attempt: %d", v.Attempt)
		}
	})
}
