package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// A durable call inside a step's function is refused where it is made (X_STEP_NESTED, terminal),
// and nothing of it is recorded: recorded, it would stand before its step in the history, and the
// run's first replay, which returns the step's output without running its function, would
// diverge from it. Under a StepTimeout the function runs on a goroutine of its own: refused alike.
func TestADurableCallInsideAStepIsRefused(t *testing.T) {
	for _, opts := range [][]jobs.Option{nil, {jobs.StepTimeout(time.Minute)}} {
		env := testenv.Start(t, testenv.Options{Store: memory.New()})
		j := jobs.MustDefine("nests", func(i int) string { return "k" }, jobs.NoTenant[int](),
			func(c *jobs.Ctx, i int) (int, error) {
				return jobs.Step(c, "outer", func(context.Context) (int, error) {
					return jobs.Step(c, "inner", func(context.Context) (int, error) { return 1, nil })
				})
			}, opts...)
		env.Worker(worker.Config{}, j)
		res, err := j.Enqueue(context.Background(), env.Engine, 1)
		if err != nil {
			t.Fatal(err)
		}
		run := env.Await(res.RunID, store.StateFailed, store.StateCompleted)
		if run.State != store.StateFailed || run.ErrorCode != string(jobs.CodeStepNested) || run.Attempt != 1 {
			t.Fatalf("opts %v: run %s %s %q at attempt %d; want failed X_STEP_NESTED at once", opts, run.State, run.ErrorCode, run.Error, run.Attempt)
		}
		for _, ev := range env.History(res.RunID) {
			if ev.Kind == history.KindStepCompleted {
				t.Fatalf("opts %v: a step was recorded: %s", opts, ev.Name)
			}
		}
	}
}

// A durable call from a parallel step's function (it captured the body's Ctx) is refused alike:
// recorded, it would stand in the history as a call of the body's, which the replay, serving the
// parallel step from the history without running it, never makes. The body's own calls while the
// step runs are not refused.
func TestADurableCallInsideAParallelStepIsRefused(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	started := make(chan struct{})
	j := jobs.MustDefine("nests-in-go", func(i int) string { return "k" }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, i int) (int, error) {
			f := jobs.Go(c, "outer", func(context.Context) (int, error) {
				<-started // the body's own step below runs while this function does
				return jobs.Step(c, "inner", func(context.Context) (int, error) { return 1, nil })
			})
			if _, err := jobs.Step(c, "beside", func(context.Context) (int, error) { return 2, nil }); err != nil {
				return 0, err
			}
			close(started)
			return f.Await(c)
		})
	env.Worker(worker.Config{}, j)
	res, err := j.Enqueue(context.Background(), env.Engine, 1)
	if err != nil {
		t.Fatal(err)
	}
	run := env.Await(res.RunID, store.StateFailed, store.StateCompleted, store.StateBlocked)
	if run.State != store.StateFailed || run.ErrorCode != string(jobs.CodeStepNested) || run.Attempt != 1 {
		t.Fatalf("run %s %s %q at attempt %d; want failed X_STEP_NESTED at once", run.State, run.ErrorCode, run.Error, run.Attempt)
	}
	var steps []string
	for _, ev := range env.History(res.RunID) {
		if ev.Kind == history.KindStepCompleted {
			steps = append(steps, ev.Name)
		}
	}
	if strings.Join(steps, ",") != "beside" {
		t.Fatalf("recorded steps %q; want the body's own step alone", steps)
	}
}

// A durable call from a goroutine the body left running, made after the body returned, is told
// that the attempt ended, not a lease story that contradicts itself (the same fence).
func TestADurableCallAfterTheBodyReturnedSaysSo(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	release, errc := make(chan struct{}), make(chan error, 1)
	j := jobs.MustDefine("leaves-a-goroutine", func(i int) string { return "k" }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, i int) (int, error) {
			go func() {
				<-release
				_, err := jobs.Step(c, "late", func(context.Context) (int, error) { return 1, nil })
				errc <- err
			}()
			return i, nil
		})
	env.Worker(worker.Config{}, j)
	res, err := j.Enqueue(context.Background(), env.Engine, 1)
	if err != nil {
		t.Fatal(err)
	}
	env.Await(res.RunID, store.StateCompleted)
	close(release)
	select {
	case err := <-errc:
		if err == nil || strings.Contains(err.Error(), "the write carries fence") {
			t.Fatalf("a step after the body returned: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the late step did not return")
	}
}
