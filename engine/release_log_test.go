package engine_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// lockedBuffer is a log sink the engine's goroutines may write to while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) lines(msg string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
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
	var logs lockedBuffer
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
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
	got := logs.lines("jobs.worker.released")
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
