package replay_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/replay"
)

// stepsRecorder answers records as an engine would.
type stepsRecorder struct {
	mu  sync.Mutex
	seq int64
}

func (r *stepsRecorder) Record(ctx context.Context, cmds []frontend.Command) (frontend.RecordResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return answerSteps(&r.seq, cmds), nil
}

// startOne starts def on a history of its RunStarted alone, on a fake clock.
func startOne(t *testing.T, def jobs.Definition, clk clock.Clock) (*replay.Execution, <-chan replay.Outcome) {
	t.Helper()
	input, _ := jobs.Encode("x")
	started := history.New(time.Now(), history.RunStarted{Job: def.Name(), Queue: jobs.DefaultQueue, Input: input, Key: "x", NoTenant: true})
	started.Seq = 1
	ex, out, err := replay.Start(t.Context(), replay.Config{Def: def, Info: jobs.RunInfo{RunID: "r", Job: def.Name(), Attempt: 1},
		Clock: clk, Recorder: &stepsRecorder{seq: 1}}, []history.Event{started})
	if err != nil {
		t.Fatal(err)
	}
	return ex, out
}

//go:noinline
func stepPanics() { panic("kaboom") }

// A step's function that panics, or ends its goroutine with runtime.Goexit, on a goroutine of
// its own fails the attempt instead of the process: a Step under a StepTimeout panics again on
// the body's goroutine, a parallel step's Await returns the panic as its error. The parallel
// steps beside it keep their results. The error names the step, the value and where it
// happened.
func TestStepPanicOffTheBodysGoroutineFailsTheAttempt(t *testing.T) {
	t.Parallel()
	inline := func(c *jobs.Ctx, fn func(context.Context) (int, error)) (int, error) {
		return jobs.Step(c, "risky", fn)
	}
	parallel := func(c *jobs.Ctx, fn func(context.Context) (int, error)) (int, error) {
		ok := jobs.Go(c, "fine", func(context.Context) (int, error) { return 1, nil })
		risky := jobs.Go(c, "risky", fn)
		if err := jobs.AwaitAll(c, ok, risky); err != nil {
			if v, err2 := ok.Await(c); err2 != nil || v != 1 {
				t.Errorf("the step beside the panic: %d, %v", v, err2)
			}
			return 0, err
		}
		return 0, nil
	}
	panics := func(context.Context) (int, error) { stepPanics(); return 0, nil }
	exits := func(context.Context) (int, error) { runtime.Goexit(); return 0, nil }
	for _, tc := range []struct {
		name        string
		call        func(*jobs.Ctx, func(context.Context) (int, error)) (int, error)
		fn          func(context.Context) (int, error)
		stepTimeout bool
		want        []string
	}{
		{"step under a stepTimeout", inline, panics, true, []string{"job j panicked: ", `step "risky" panicked: kaboom`, "stepPanics"}},
		{"parallel step", parallel, panics, false, []string{`step "risky" panicked: kaboom`, "stepPanics"}},
		{"parallel step under a stepTimeout", parallel, panics, true, []string{`step "risky" panicked: kaboom`, "stepPanics"}},
		{"parallel step ending its goroutine", parallel, exits, false, []string{`step "risky" panicked: runtime.Goexit`}},
		{"step under a stepTimeout ending its goroutine", inline, exits, true, []string{`step "risky" panicked: runtime.Goexit`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var opts []jobs.Option
			if tc.stepTimeout {
				opts = append(opts, jobs.StepTimeout(time.Minute))
			}
			def := jobs.MustDefine("j", func(in string) string { return in }, jobs.NoTenant[string](),
				func(c *jobs.Ctx, _ string) (int, error) { return tc.call(c, tc.fn) }, opts...)
			ex, out := startOne(t, def, clock.NewFake(time.Now()))
			o := <-out
			<-ex.Exited()
			if o.Kind != replay.Failed || o.Err == nil {
				t.Fatalf("outcome %v (%v), want failed", o.Kind, o.Err)
			}
			if c := jobs.CodeOf(o.Err); c != "" {
				t.Errorf("code %s; a panic is unclassified, retried like a body's", c)
			}
			for _, w := range tc.want {
				if !strings.Contains(o.Err.Error(), w) {
					t.Errorf("the error lacks %q:\n%s", w, o.Err)
				}
			}
		})
	}
}

// A step that panics after its StepTimeout failed it panics with nobody waiting: the panic is
// dropped, and the process lives on.
func TestStepPanicPastItsStepTimeoutIsDropped(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	started, release, unwinding := make(chan struct{}), make(chan struct{}), make(chan struct{})
	def := jobs.MustDefine("late", func(in string) string { return in }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, _ string) (int, error) {
			return jobs.Step(c, "slow", func(context.Context) (int, error) {
				close(started)
				<-release
				defer close(unwinding)
				stepPanics()
				return 0, nil
			})
		}, jobs.StepTimeout(time.Minute))
	ex, out := startOne(t, def, clk)
	<-started // the step's timer is set before fn starts
	clk.Advance(time.Minute)
	o := <-out
	<-ex.Exited()
	if o.Kind != replay.Failed || jobs.CodeOf(o.Err) != jobs.CodeStepTimeout {
		t.Fatalf("outcome %v (%v), want X_STEP_TIMEOUT", o.Kind, o.Err)
	}
	close(release)
	<-unwinding
	time.Sleep(50 * time.Millisecond) // were it not recovered, the panic would end the test binary here
}
