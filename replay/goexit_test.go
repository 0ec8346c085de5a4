package replay_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/replay"
)

// A body that ends its goroutine with runtime.Goexit (a t.FailNow in a body under test, say), or
// whose step's function run in line does, fails the attempt as a panic does: the claim has an
// outcome once the body's goroutine has ended. Before, it had none, and the worker waited for
// it until the attempt's timeout (forever without one) and replay.Check never returned.
func TestABodyEndingItsGoroutineFailsTheAttempt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want, step string
		body             func(*jobs.Ctx) (int, error)
	}{
		{"the body", "runtime.Goexit: the body ended its goroutine", "", func(c *jobs.Ctx) (int, error) {
			if _, err := jobs.Step(c, "before", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return 0, err
			}
			runtime.Goexit()
			return 0, nil
		}},
		{"a step in line", `runtime.Goexit: step "quits" ended its goroutine`, "quits", func(c *jobs.Ctx) (int, error) {
			return jobs.Step(c, "quits", func(context.Context) (int, error) { runtime.Goexit(); return 0, nil })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			def := jobs.MustDefine("quitter", func(in string) string { return in }, jobs.NoTenant[string](),
				func(c *jobs.Ctx, _ string) (int, error) { return tc.body(c) })
			ex, out := startOne(t, def, clock.NewFake(time.Now()))
			<-ex.Exited()
			// The outcome is sent before the goroutine ends, or never.
			var o replay.Outcome
			select {
			case o = <-out:
			default:
				t.Fatal("the body's goroutine ended without an outcome")
			}
			if o.Kind != replay.Failed || o.Err == nil || !strings.Contains(o.Err.Error(), "job quitter panicked: "+tc.want) {
				t.Fatalf("outcome %v (%v), want failed with %q", o.Kind, o.Err, tc.want)
			}
			if c := jobs.CodeOf(o.Err); c != "" {
				t.Errorf("code %s; like a panic, unclassified", c)
			}
			if o.Step != tc.step {
				t.Errorf("outcome's step %q, want %q", o.Step, tc.step)
			}
		})
	}

	// replay.Check of the same body returns.
	def := jobs.MustDefine("quitter", func(in string) string { return in }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, _ string) (int, error) { runtime.Goexit(); return 0, nil })
	input, _ := jobs.Encode("x")
	started := history.New(time.Now(), history.RunStarted{Job: "quitter", Queue: jobs.DefaultQueue, Input: input, Key: "x", NoTenant: true})
	started.Seq = 1
	done := make(chan error, 1)
	go func() { done <- replay.Check(t.Context(), def, []history.Event{started}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("replay.Check of a history that ends where the body quits: %v; the failure is the body's business", err)
		}
	case <-time.After(time.Minute): // a guard against a hang, not a measurement
		t.Fatal("replay.Check did not return")
	}
}
