package main

import (
	"bytes"
	"context"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/examples"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

func TestMain(m *testing.M) {
	// fx's signal relay starts os/signal's process-wide reader, which by design never exits.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("os/signal.signal_recv"), goleak.IgnoreTopFunction("os/signal.loop"))
}

func TestParseQueues(t *testing.T) {
	t.Parallel()
	reg := examples.Registry()
	got, err := parseQueues("", 7, reg)
	if err != nil || len(got) != 4 || got["default"] != 7 || got["orders"] != 7 || got["shipping"] != 7 || got["labels"] != 7 {
		t.Fatalf("default queues = %v, %v", got, err)
	}
	got, err = parseQueues("orders=20, default", 3, reg)
	if err != nil || got["orders"] != 20 || got["default"] != 3 {
		t.Fatalf("explicit queues = %v, %v", got, err)
	}
	for _, bad := range []string{"orders=0", "orders=x", "=4", ","} {
		if _, err := parseQueues(bad, 3, reg); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--concurrency", "0"},
		{"--queues", "orders=0"},
		{"--server", "ftp://x"},
		{"--onboarding-sleep", "-1s"},
		{"--heartbeat", "-1s"},
		{"--log-level", "loud"},
		{"--token", "t\n"},
		{"--drain-timeout", "0s"},
		{"--drain-timeout", "-1s"},
		{"extra-arg"},
	} {
		var out, errb bytes.Buffer
		// Bounded: a worker that got past its flags would serve until its context ends.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if code := run(ctx, args, &out, &errb); code != 2 || !strings.HasPrefix(errb.String(), "X_BAD_REQUEST: ") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and X_BAD_REQUEST", args, code, errb.String())
		}
		cancel()
	}
}

// A duration variable the worker cannot read is refused, as the engine's serve refuses its own,
// rather than run with the flag's default: each is named in the refusal.
func TestMalformedDurationEnvIsAUsageError(t *testing.T) {
	for _, name := range envDurations {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, "banana")
			// Nothing listens on port 1: a worker that got past its flags would retry until the
			// context ends, then exit 0 after its drain.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var out, errb bytes.Buffer
			code := run(ctx, []string{"--server", "127.0.0.1:1"}, &out, &errb)
			if want := `X_BAD_REQUEST: $` + name + ` "banana"`; code != 2 || !strings.HasPrefix(errb.String(), want) {
				t.Fatalf("%s=banana: exit %d, stderr %q; want 2 and %q", name, code, errb.String(), want)
			}
		})
	}
}

// A --metrics-addr the worker cannot listen on fails it (exit 1) with the code the engine gives a
// failed listen, X_LISTEN_FAILED, not as a bad request.
func TestBusyMetricsAddrIsListenFailed(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"--server", "127.0.0.1:1", "--metrics-addr", ln.Addr().String()}, &out, &errb)
	if code != 1 || !strings.HasPrefix(errb.String(), "X_LISTEN_FAILED: ") {
		t.Fatalf("busy --metrics-addr: exit %d, stderr %q; want 1 and X_LISTEN_FAILED", code, errb.String())
	}
}

// TestRunsTheExamplesAndDrains runs the worker command in-process against an engine behind the
// API, completes an onboarding through it, then stops it as SIGTERM would.
func TestRunsTheExamplesAndDrains(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr testenv.LogBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--server", ts.URL, "--token", "t", "--poll-wait", "200ms",
			"--onboarding-sleep", "200ms", "--log-level", "debug"}, &bytes.Buffer{}, &stderr)
	}()

	res, err := examples.Onboarding.Enqueue(context.Background(), env.Engine, examples.OnboardingInput{OrgID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	// The worker binary runs on the wall clock, so the engine does too: the 200ms sleep wakes on
	// its own, and the run then waits for its plan.
	deadline := time.Now().Add(20 * time.Second)
	for len(env.History(res.RunID)) < 6 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := env.Engine.Publish(context.Background(), "plan.chosen", examples.PlanChosen{OrgID: "w", Plan: "pro"}); err != nil {
		t.Fatal(err)
	}
	env.Await(res.RunID, store.StateCompleted)

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("worker exited %d:\n%s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the worker did not drain within 15s")
	}
	if !strings.Contains(stderr.String(), "jobs.stopped") {
		t.Fatalf("no clean stop in the log:\n%s", stderr.String())
	}
}
