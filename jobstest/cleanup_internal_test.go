package jobstest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/worker"
)

// cleanups is a testing.TB whose cleanups and failures the test runs and reads itself.
type cleanups struct {
	testing.TB
	funcs  []func()
	errors []string
}

func (c *cleanups) Helper()                        {}
func (c *cleanups) Cleanup(f func())               { c.funcs = append(c.funcs, f) }
func (c *cleanups) Errorf(format string, _ ...any) { c.errors = append(c.errors, format) }

type stuckInput struct {
	ID string `json:"id"`
}

// A body that ignores its context's end is still running when the cleanup gives up on the
// worker's drain: the cleanup fails the test and says so, where it used to drop the error and
// let the test pass with the body running on.
func TestCleanupReportsABodyThatDoesNotStop(t *testing.T) {
	t.Parallel()
	inStep, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	stuck := jobs.MustDefine("stuck-in-step", func(in stuckInput) string { return in.ID }, jobs.NoTenant[stuckInput](),
		func(ctx *jobs.Ctx, in stuckInput) (string, error) {
			return jobs.Step(ctx, "ignore", func(context.Context) (string, error) {
				close(inStep)
				<-release // never looks at its context
				return "done", nil
			})
		})
	rec := &cleanups{TB: t}
	env := New(rec, Options{})
	env.stopTimeout = 50 * time.Millisecond
	env.StartWorker(worker.Config{}, stuck)
	if _, err := stuck.Enqueue(context.Background(), env.Engine, stuckInput{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	<-inStep
	if len(rec.funcs) != 2 {
		t.Fatalf("%d cleanups, want the engine's and the worker's", len(rec.funcs))
	}
	rec.funcs[1]() // the worker's, which runs first
	env.stopTimeout = 10 * time.Second
	rec.funcs[0]() // the engine's
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "the worker did not stop") {
		t.Fatalf("cleanup reported %q, want one failure saying the worker did not stop", rec.errors)
	}
}
