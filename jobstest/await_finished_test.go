package jobstest_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/jobstest"
	"github.com/ultimat3/jobs/store"
)

// fatals is a testing.TB whose Fatalf records the message and ends the calling goroutine, as
// testing's does.
type fatals struct {
	testing.TB
	msg string
}

func (f *fatals) Helper() {}
func (f *fatals) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatalOf runs f with a recorder and returns what it failed with ("" when it did not).
func fatalOf(t testing.TB, f func(tb testing.TB)) string {
	rec := &fatals{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(rec)
	}()
	<-done
	return rec.msg
}

// A run that finished in another state than the one awaited (it failed where the test expected
// it asleep) changes no more: Await fails the test at once with the run's state and error,
// where it used to wait out its 20 seconds first.
func TestAwaitFailsAtOnceOnAFinishedRun(t *testing.T) {
	t.Parallel()
	refused := jobs.MustDefine("refused", func(in order) string { return in.ID }, jobs.NoTenant[order](),
		func(ctx *jobs.Ctx, in order) (string, error) {
			return "", jobs.Errorf(jobs.CodeBadRequest, "order %s is malformed", in.ID)
		})
	env := jobstest.New(t, jobstest.Options{}, refused)
	run := jobstest.Enqueue(env, refused, order{ID: "o9"})
	env.Await(run, store.StateFailed)

	probe := *env
	for name, await := range map[string]func(tb testing.TB){
		"Env.AwaitSuspended": func(tb testing.TB) { probe.T = tb; probe.AwaitSuspended(run) },
		"Await":              func(tb testing.TB) { jobstest.Await(tb, env.Engine, run, store.StateSuspended) },
	} {
		msg := fatalOf(t, await)
		if !strings.Contains(msg, "is failed, want one of [suspended]") || !strings.Contains(msg, "order o9 is malformed") {
			t.Errorf("%s failed with %q, want the run's end and its error", name, msg)
		}
	}
}
