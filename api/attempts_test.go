package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// TestMaxAttemptsIsTheEngines: when a job's declared attempts are spent, the run is
// dead-lettered with X_JOB_MAX_ATTEMPTS and its last error kept, even when the worker asks for
// another retry.
func TestMaxAttemptsIsTheEngines(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	ctx := context.Background()
	twice := jobs.MustDefine("twice", func(s any) string { return "" }, jobs.NoTenant[any](),
		func(*jobs.Ctx, any) (any, error) { return nil, nil }, jobs.Queue("q"), jobs.Retry(jobs.RetryPolicy{Attempts: 2}))
	testenv.Declare(t, b.client, "w", twice)
	res, err := b.client.Enqueue(ctx, jobs.EnqueueRequest{Job: "twice", Key: "k", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	failAndRetry := func() frontend.RecordResponse {
		t.Helper()
		tasks, err := b.client.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 1})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("claim: %v %v", tasks, err)
		}
		task := tasks[0]
		// A worker that retries whatever the policy says.
		resp, err := b.client.Record(ctx, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w",
			LeaseToken: task.LeaseToken, AfterSeq: task.LastSeq, Commands: []frontend.Command{{Kind: frontend.CmdFail,
				Attempt: task.Attempt, Code: "X_BOOM", Error: "X_BOOM: the gateway said no", RetryAt: b.env.Clock.Now().Add(time.Second)}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := failAndRetry(); resp.State != string(store.StateDelayed) {
		t.Fatalf("attempt 1 of 2: %s, want delayed", resp.State)
	}
	b.env.Advance(2 * time.Second)
	if resp := failAndRetry(); resp.State != string(store.StateFailed) {
		t.Fatalf("attempt 2 of 2: %s, want failed", resp.State)
	}
	run, err := b.env.Engine.GetRun(ctx, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.ErrorCode != string(jobs.CodeJobMaxAttempts) || run.StopReason != "attempts-exhausted" ||
		!strings.Contains(run.Error, "X_BOOM: the gateway said no") || !strings.Contains(run.Error, "attempt 2 of 2") {
		t.Fatalf("dead letter: %s %s %q", run.ErrorCode, run.StopReason, run.Error)
	}
	last := b.env.History(res.RunID)
	p, err := last[len(last)-2].Decode()
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := p.(history.AttemptFailed); !ok || a.Code != "X_BOOM" {
		t.Fatalf("the attempt's own failure: %+v", p)
	}
}

// TestExhaustedRunCarriesMaxAttempts: a worker whose policy runs out dead-letters the run with
// X_JOB_MAX_ATTEMPTS, the last error kept.
func TestExhaustedRunCarriesMaxAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	ctx := context.Background()
	fails := jobs.MustDefine("fails", func(s string) string { return s }, jobs.NoTenant[string](),
		func(*jobs.Ctx, string) (string, error) { return "", errors.New("disk full") },
		jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
	b.remoteWorker(t, fails)
	res, err := fails.Enqueue(ctx, b.client, "x")
	if err != nil {
		t.Fatal(err)
	}
	run := b.env.Await(res.RunID, store.StateFailed)
	if run.ErrorCode != string(jobs.CodeJobMaxAttempts) || !strings.Contains(run.Error, "disk full") {
		t.Fatalf("dead letter: %s %q", run.ErrorCode, run.Error)
	}
}
