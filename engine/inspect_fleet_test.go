package engine_test

import (
	"context"
	"testing"

	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
)

// InspectManifest counts the runs each worker holds, and flags a job two current workers
// declare differently; Declarations (what the scheduler reads every round) is left as it was.
func TestInspectManifestInFlightAndConflicts(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		// "export" on two queues is two declarations (two checksums) of one job; "audit" is
		// declared alike by both workers.
		testenv.Declare(t, env.Engine, "w1", testenv.Untyped("export", "q1"), testenv.Untyped("audit", "q1"))
		testenv.Declare(t, env.Engine, "w2", testenv.Untyped("export", "q2"), testenv.Untyped("audit", "q1"))
		for _, k := range []string{"a", "b", "c"} {
			enqueue(t, env, "export", "q1", k)
		}
		tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w1", Queues: []string{"q1"}, Max: 2})
		if err != nil || len(tasks) != 2 {
			t.Fatalf("poll: %v %v", tasks, err)
		}
		v, err := env.Engine.InspectManifest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held := map[string]int{}
		for _, w := range v.Workers {
			held[w.ID] = w.InFlight
		}
		if held["w1"] != 2 || held["w2"] != 0 {
			t.Errorf("in flight %v, want w1 2 and w2 0", held)
		}
		conflicts := map[string]int{}
		for _, d := range v.Declarations {
			if d.Conflict {
				conflicts[d.Name]++
			}
		}
		if conflicts["export"] != 2 || conflicts["audit"] != 0 {
			t.Errorf("conflicts %v, want both declarations of export and none of audit", conflicts)
		}
		ds, err := env.Engine.Declarations(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, d := range ds {
			if d.Conflict {
				n++
			}
		}
		if n != 2 {
			t.Errorf("Declarations(job) flags %d conflicting declarations, want 2", n)
		}

		// Once w2 declares export as w1 does, its other declaration is held by nobody: no
		// conflict (a stopped build's declaration is history, not a disagreement).
		testenv.Declare(t, env.Engine, "w2", testenv.Untyped("export", "q1"), testenv.Untyped("audit", "q1"))
		if v, err = env.Engine.InspectManifest(ctx); err != nil {
			t.Fatal(err)
		}
		for _, d := range v.Declarations {
			if d.Conflict {
				t.Errorf("%s %s (%s) still conflicts after the fleet agreed", d.Kind, d.Name, d.Checksum)
			}
		}
	})
}
