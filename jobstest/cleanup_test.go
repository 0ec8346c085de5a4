package jobstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/jobstest"
	"github.com/ultimat3/jobs/store"
)

// A test may end while a run is still inside a step (it checked what it wanted and returned).
// The cleanup ends the step's context, so a step that honours it returns and the worker
// drains: nothing of the test runs on after it, on a store being closed. It used to wait out
// the worker's whole stop timeout and leave the step running.
func TestCleanupEndsAStepStillRunning(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]jobstest.Options{"memory": {}, "sqlite": {SQLite: true}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			inStep, ended := make(chan struct{}), make(chan struct{})
			waits := jobs.MustDefine("waits-in-step", func(in order) string { return in.ID }, jobs.NoTenant[order](),
				func(ctx *jobs.Ctx, in order) (string, error) {
					return jobs.Step(ctx, "wait", func(c context.Context) (string, error) {
						close(inStep)
						defer close(ended)
						select {
						case <-c.Done():
							return "", c.Err()
						case <-time.After(time.Hour):
							return "late", nil
						}
					})
				})
			t.Run("ends mid-step", func(t *testing.T) {
				env := jobstest.New(t, o, waits)
				run := jobstest.Enqueue(env, waits, order{ID: "o1"})
				<-inStep
				env.AssertState(run, store.StateRunning)
			})
			select {
			case <-ended:
			default:
				t.Fatal("the step is still running after the test's cleanup")
			}
		})
	}
}
