package jobs_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/replay"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// Three parallel steps finish in the reverse of the order they were started, a fourth fails on
// its first try; the run then sleeps without parking, so the wake-up replays the whole body: each
// recorded step is served back by name (none runs twice), AwaitFirst names the same step live and
// on replay (the first recorded), and the failed step, handled by the body, runs again.
func TestParallelStepsReplayInAnyCompletionOrder(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			release := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{}), "c": make(chan struct{})}
			var mu sync.Mutex
			runs := map[string]int{}
			var firsts []int
			var flaky atomic.Int32
			step := func(name string) func(context.Context) (string, error) {
				return func(ctx context.Context) (string, error) {
					mu.Lock()
					runs[name]++
					mu.Unlock()
					select {
					case <-release[name]:
					case <-ctx.Done():
						return "", ctx.Err()
					}
					return "out:" + name, nil
				}
			}
			fan := jobs.MustDefine("fan", func(in string) string { return in }, jobs.NoTenant[string](),
				func(c *jobs.Ctx, in string) ([]string, error) {
					a := jobs.Go(c, "a", step("a"))
					b := jobs.Go(c, "b", step("b"))
					cc := jobs.Go(c, "c", step("c"))
					d := jobs.Go(c, "d", func(context.Context) (int, error) {
						if flaky.Add(1) == 1 {
							return 0, errors.New("d is down")
						}
						return 4, nil
					})
					first, err := jobs.AwaitFirst(c, a, b, cc)
					if err != nil {
						return nil, err
					}
					mu.Lock()
					firsts = append(firsts, first)
					mu.Unlock()
					if err := jobs.AwaitAll(c, a, b, cc); err != nil {
						return nil, err
					}
					dv, derr := d.Await(c)
					if derr != nil {
						dv = -1 // the caller's to handle: the other steps keep their results
					}
					if err := jobs.SleepFor(c, time.Hour); err != nil {
						return nil, err
					}
					av, _ := a.Await(c)
					bv, _ := b.Await(c)
					cv, _ := cc.Await(c)
					// The live attempt saw d fail and went on: the replay after the sleep sees
					// the same failure (it is recorded), not a run of d that succeeds.
					return []string{av, bv, cv, map[bool]string{true: "d-failed", false: "d-ok"}[dv < 0]}, nil
				})
			env.Worker(worker.Config{StickyRuns: -1}, fan)
			res, err := fan.Enqueue(t.Context(), env.Engine, "x")
			if err != nil {
				t.Fatal(err)
			}
			waitStep := func(name string) {
				deadline := time.Now().Add(20 * time.Second)
				for time.Now().Before(deadline) {
					for _, ev := range env.History(res.RunID) {
						if ev.Kind == history.KindStepCompleted && ev.Name == name {
							return
						}
					}
					time.Sleep(2 * time.Millisecond)
				}
				t.Fatalf("step %s was never recorded", name)
			}
			for _, n := range []string{"c", "b", "a"} {
				close(release[n])
				waitStep(n)
			}
			env.Await(res.RunID, store.StateSuspended)
			env.Advance(time.Hour)
			run := env.Await(res.RunID, store.StateCompleted)

			var out []string
			if err := jobs.Decode(run.Result, &out); err != nil {
				t.Fatal(err)
			}
			if want := []string{"out:a", "out:b", "out:c", "d-failed"}; !equal(out, want) {
				t.Errorf("result %v, want %v", out, want)
			}
			mu.Lock()
			if runs["a"] != 1 || runs["b"] != 1 || runs["c"] != 1 {
				t.Errorf("steps ran %v times; each recorded step must run once ever", runs)
			}
			if len(firsts) != 2 || firsts[0] != 2 || firsts[1] != 2 {
				t.Errorf("AwaitFirst returned %v live then on replay; want the first recorded (c, index 2) both times", firsts)
			}
			mu.Unlock()
			var order []string
			failedD := false
			for _, ev := range env.History(res.RunID) {
				if ev.Kind == history.KindStepFailed && ev.Name == "d" {
					p, _ := ev.Decode()
					failedD = p.(history.StepFailed).Parallel
				}
				if ev.Kind != history.KindStepCompleted {
					continue
				}
				p, _ := ev.Decode()
				if !p.(history.StepCompleted).Parallel {
					t.Errorf("step %s is not marked parallel", ev.Name)
				}
				order = append(order, ev.Name)
			}
			// d failed on the live attempt, and its failure, seen by the body, went out with the
			// sleep's record: the replay did not run it again.
			if want := []string{"c", "b", "a"}; !equal(order, want) || !failedD || flaky.Load() != 1 {
				t.Errorf("recorded steps %v, d's failure recorded as parallel %v, d ran %d times; want completion order %v, true, once",
					order, failedD, flaky.Load(), want)
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The rules a sequential step keeps hold for parallel ones on replay: a recorded parallel step
// the code no longer starts, or now calls as a sequential step, is X_REPLAY_DIVERGED; a name
// used twice is X_STEP_DUPLICATE.
func TestParallelStepsReplayRules(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	events := []history.Event{
		history.New(at, history.RunStarted{Job: "p", Queue: jobs.DefaultQueue, Input: mustEnc(t, "k"), Key: "k", NoTenant: true}),
		history.New(at, history.StepCompleted{StepName: "y", Output: mustEnc(t, 2), Parallel: true}),
		history.New(at, history.StepCompleted{StepName: "x", Output: mustEnc(t, 1), Parallel: true}),
		history.New(at, history.RunCompleted{}),
	}
	for i := range events {
		events[i].Seq = int64(i + 1)
	}
	def := func(body func(c *jobs.Ctx) (int, error)) jobs.Definition {
		return jobs.MustDefine("p", func(string) string { return "k" }, jobs.NoTenant[string](),
			func(c *jobs.Ctx, _ string) (int, error) { return body(c) })
	}
	never := func(context.Context) (int, error) { return 0, errors.New("a recorded step ran") }
	cases := []struct {
		name string
		body func(c *jobs.Ctx) (int, error)
		want jobs.Code
	}{
		{"same code, any await order", func(c *jobs.Ctx) (int, error) {
			x, y := jobs.Go(c, "x", never), jobs.Go(c, "y", never)
			yv, err := y.Await(c)
			if err != nil {
				return 0, err
			}
			xv, err := x.Await(c)
			if xv != 1 || yv != 2 {
				return 0, jobs.Errorf(jobs.CodeEncoding, "x=%d y=%d", xv, yv)
			}
			return xv + yv, err
		}, ""},
		{"a parallel step dropped", func(c *jobs.Ctx) (int, error) {
			return jobs.Go(c, "x", never).Await(c)
		}, jobs.CodeReplayDiverged},
		{"a parallel step made sequential", func(c *jobs.Ctx) (int, error) {
			jobs.Go(c, "x", never)
			return jobs.Step(c, "y", never)
		}, jobs.CodeReplayDiverged},
		{"a name used twice", func(c *jobs.Ctx) (int, error) {
			jobs.Go(c, "x", never)
			jobs.Go(c, "x", never)
			return 0, nil
		}, jobs.CodeStepDuplicate},
	}
	for _, tc := range cases {
		err := replay.Check(t.Context(), def(tc.body), events)
		if tc.want == "" && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if tc.want != "" && !jobs.HasCode(err, tc.want) {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
}

func mustEnc(t *testing.T, v any) []byte {
	t.Helper()
	b, err := jobs.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A step the history records as a plain Step, which the code now starts with jobs.Go, blocks the
// run with X_REPLAY_DIVERGED before anything runs, and replay.Check reports it: run live, the
// step's function ran a second time (a charge twice), its record was refused as a duplicate and
// the run failed for good, and the deploy check passed the change.
func TestAStepNowStartedWithGoDiverges(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	var charged atomic.Int32
	charge := func(context.Context) (int, error) { charged.Add(1); return 1, nil }
	define := func(parallel bool) *jobs.Job[int, int] {
		return jobs.MustDefine("pay", func(int) string { return "k" }, jobs.NoTenant[int](),
			func(c *jobs.Ctx, in int) (int, error) {
				var v int
				var err error
				if parallel {
					v, err = jobs.Go(c, "charge", charge).Await(c)
				} else {
					v, err = jobs.Step(c, "charge", charge)
				}
				if err != nil {
					return 0, err
				}
				return v, jobs.Sleep(c, "settle", time.Hour)
			}, jobs.Retry(jobs.RetryPolicy{Attempts: 3}))
	}
	old, newer := define(false), define(true)
	w := env.Worker(worker.Config{StickyRuns: -1}, old)
	res, err := old.Enqueue(t.Context(), env.Engine, 1)
	if err != nil {
		t.Fatal(err)
	}
	env.Await(res.RunID, store.StateSuspended)
	_ = w.Stop(context.Background())
	if err := replay.Check(t.Context(), newer, env.History(res.RunID)); !jobs.HasCode(err, jobs.CodeReplayDiverged) {
		t.Fatalf("replay.Check of the new code: %v; want X_REPLAY_DIVERGED", err)
	}
	env.Worker(worker.Config{StickyRuns: -1}, newer)
	env.Advance(time.Hour)
	run := env.Await(res.RunID, store.StateBlocked, store.StateFailed)
	if run.State != store.StateBlocked || run.ErrorCode != string(jobs.CodeReplayDiverged) || charged.Load() != 1 {
		t.Fatalf("the run is %s (%s %s), charged %d times; want blocked, X_REPLAY_DIVERGED, charged once", run.State, run.ErrorCode, run.Error, charged.Load())
	}
}
