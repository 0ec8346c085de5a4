package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// linesOf returns the lines of logs that carry msg.
func linesOf(logs *testenv.LogBuffer, msg string) []string {
	var out []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "msg="+msg) {
			out = append(out, l)
		}
	}
	return out
}

// A release that takes claims back from running bodies is a lost lease, and as loud as one that
// lapsed: a warning naming how many it took back. A release that finds nothing running stays at
// info.
func TestAReleaseThatTakesBackRunningClaimsWarns(t *testing.T) {
	t.Parallel()
	var logs testenv.LogBuffer
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Logger: logs.Logger()})
	ctx := context.Background()
	testenv.Declare(t, env.Engine, "host-a", testenv.Untyped("orphan", "orphans"))
	if _, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "orphan", Queue: "orphans", Key: "o1", NoTenant: true}); err != nil {
		t.Fatal(err)
	}
	if tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "host-a", Queues: []string{"orphans"}, Max: 1}); err != nil || len(tasks) != 1 {
		t.Fatalf("poll: %v %v", tasks, err)
	}
	if err := env.Engine.WorkerStart(ctx, frontend.Session{WorkerID: "host-a"}); err != nil {
		t.Fatal(err)
	}
	if err := env.Engine.WorkerStop(ctx, frontend.Session{WorkerID: "host-a"}); err != nil {
		t.Fatal(err)
	}
	got := linesOf(&logs, "jobs.worker.released")
	if len(got) != 2 {
		t.Fatalf("release lines %q, want two", got)
	}
	if !strings.Contains(got[0], "level=WARN") || !strings.Contains(got[0], "why=start") || !strings.Contains(got[0], "reclaimed=1") {
		t.Errorf("the release of a running claim logged %q, want a warning with reclaimed=1", got[0])
	}
	if !strings.Contains(got[1], "level=INFO") || !strings.Contains(got[1], "why=stop") || !strings.Contains(got[1], "reclaimed=0") {
		t.Errorf("a release of nothing running logged %q, want info with reclaimed=0", got[1])
	}
}
