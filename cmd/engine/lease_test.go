package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
)

func TestServeLeaseFlag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	expect(t, runCmd(ctx, "serve", "--lease", "0s", "--data-dir", t.TempDir(), "--database-url", ""), 2, "X_BAD_REQUEST: ")
	expect(t, runCmd(ctx, "serve", "--session-grace", "-1s", "--data-dir", t.TempDir(), "--database-url", ""), 2, "X_BAD_REQUEST: ")

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stderr testenv.LogBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--database-url", "",
			"--lease", "7s", "--allow-undeclared"}, &bytes.Buffer{}, &stderr)
	}()
	defer func() { cancel(); <-done }()
	addr := ""
	re := regexp.MustCompile(`jobs.api.listening addr=(\S+)`)
	for deadline := time.Now().Add(30 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatalf("the engine did not start:\n%s", stderr.String())
	}
	expect(t, runCmd(ctx, "jobs", "enqueue", "j", "--input", "null", "--key", "k", "--no-tenant", "--server", addr), 0, "")
	c, err := api.NewClient("http://"+addr, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testenv.Declare(t, c, "w", testenv.Untyped("j", "default"))
	tasks, err := c.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"default"}, Max: 1, Wait: 5 * time.Second})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("poll: %v, %d tasks", err, len(tasks))
	}
	if tasks[0].Lease != 7*time.Second || time.Until(tasks[0].LeaseUntil) > 7*time.Second {
		t.Errorf("claim leased %s until %s; want the --lease of 7s", tasks[0].Lease, tasks[0].LeaseUntil)
	}
}
