package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
)

// A nil WaitOption is refused with X_BAD_REQUEST, as a bad timeout or lookback is, instead of
// panicking the body.
func TestWaitForEventRefusesANilOption(t *testing.T) {
	t.Parallel()
	c := jobs.NewCtx(context.Background(), jobs.RunInfo{RunID: "r"}, nil) // refused before the runtime is asked
	_, ok, err := jobs.WaitForEvent[string](c, "plan", "plan.chosen", nil, time.Hour, jobs.WithLookback(jobs.LookbackNone), nil)
	if ok || !jobs.HasCode(err, jobs.CodeBadRequest) || !strings.Contains(err.Error(), "option 1 is nil") {
		t.Fatalf("%v, %v; want X_BAD_REQUEST naming option 1", ok, err)
	}
}

// A nil definition, or a nil *Job (a Define whose error was dropped), is refused with
// X_JOB_DEFINITION, as a nil option is, instead of panicking on its name.
func TestRegistryRefusesNilDefinitions(t *testing.T) {
	t.Parallel()
	var typedNil *jobs.Job[int, int]
	ok := jobs.MustDefine("ok", func(int) string { return "k" }, jobs.NoTenant[int](),
		func(*jobs.Ctx, int) (int, error) { return 0, nil })
	if _, err := jobs.NewRegistry(nil); !jobs.HasCode(err, jobs.CodeJobDefinition) {
		t.Errorf("NewRegistry(nil): %v", err)
	}
	if _, err := jobs.NewRegistry(ok, typedNil); !jobs.HasCode(err, jobs.CodeJobDefinition) || !strings.Contains(err.Error(), "1 is nil") {
		t.Errorf("NewRegistry(ok, nil *Job): %v", err)
	}
	r, err := jobs.NewRegistry(ok)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []jobs.Definition{nil, typedNil} {
		if err := r.Register(d); !jobs.HasCode(err, jobs.CodeJobDefinition) {
			t.Errorf("Register(%#v): %v", d, err)
		}
	}
	if len(r.All()) != 1 {
		t.Errorf("the registry holds %d definitions, want 1", len(r.All()))
	}
}

// A durable call outside a job body (a nil Ctx, or one not made by the worker) is refused with
// an error that says so, not a nil-pointer panic.
func TestDurableCallsOutsideABodyAreRefused(t *testing.T) {
	for what, c := range map[string]*jobs.Ctx{"nil": nil, "zero": {}} {
		calls := map[string]func() error{
			"Step": func() error {
				_, err := jobs.Step(c, "s", func(context.Context) (int, error) { return 1, nil })
				return err
			},
			"Sleep":    func() error { return jobs.Sleep(c, "nap", time.Second) },
			"SleepFor": func() error { return jobs.SleepFor(c, time.Second) },
			"WaitForEvent": func() error {
				_, _, err := jobs.WaitForEvent[int](c, "w", "e", nil, time.Second)
				return err
			},
			"Publish": func() error { _, err := jobs.Publish(c, "e", 1); return err },
			"Version": func() error { _, err := jobs.Version(c, "change", jobs.DefaultVersion, 1); return err },
		}
		for name, call := range calls {
			err := call()
			if err == nil {
				t.Errorf("%s with a %s Ctx: no error", name, what)
			}
		}
	}
}

// A job whose input or result type msgpack cannot encode is refused at Define, not after its
// body and side effects ran.
func TestDefineRefusesTypesThatCannotBeEncoded(t *testing.T) {
	type withFunc struct{ F func() }
	_, err := jobs.Define("chan-out", func(int) string { return "k" }, jobs.NoTenant[int](),
		func(*jobs.Ctx, int) (chan int, error) { return nil, nil })
	if !jobs.HasCode(err, jobs.CodeJobDefinition) {
		t.Errorf("a channel result: %v, want X_JOB_DEFINITION", err)
	}
	_, err = jobs.Define("func-in", func(withFunc) string { return "k" }, jobs.NoTenant[withFunc](),
		func(*jobs.Ctx, withFunc) (int, error) { return 0, nil })
	if !jobs.HasCode(err, jobs.CodeJobDefinition) {
		t.Errorf("an input holding a func: %v, want X_JOB_DEFINITION", err)
	}
}
