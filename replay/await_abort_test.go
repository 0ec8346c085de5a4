package replay_test

import (
	"context"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
)

// An await the attempt's end cuts short says why as a step does: the abort's own error
// (X_ABORTED here), not a bare context error with no code, for Await, AwaitAll and AwaitFirst.
func TestAnAwaitCutShortByTheAttemptsEndSaysWhy(t *testing.T) {
	t.Parallel()
	for _, await := range []struct {
		name string
		call func(c *jobs.Ctx, f *jobs.Future[int]) error
	}{
		{"Await", func(c *jobs.Ctx, f *jobs.Future[int]) error { _, err := f.Await(c); return err }},
		{"AwaitAll", func(c *jobs.Ctx, f *jobs.Future[int]) error { return jobs.AwaitAll(c, f) }},
		{"AwaitFirst", func(c *jobs.Ctx, f *jobs.Future[int]) error { _, err := jobs.AwaitFirst(c, f); return err }},
	} {
		t.Run(await.name, func(t *testing.T) {
			t.Parallel()
			release, awaiting, got := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			defer close(release)
			def := jobs.MustDefine("awaiter", func(in string) string { return in }, jobs.NoTenant[string](),
				func(c *jobs.Ctx, _ string) (int, error) {
					// A step that does not watch its context: only the attempt's end stops the await.
					f := jobs.Go(c, "slow", func(context.Context) (int, error) { <-release; return 1, nil })
					close(awaiting)
					err := await.call(c, f)
					got <- err
					return 0, err
				})
			ex, _ := startOne(t, def, clock.NewFake(time.Now()))
			<-awaiting
			ex.Abort(jobs.Errorf(jobs.CodeAborted, "the worker stops"))
			select {
			case err := <-got:
				if !jobs.HasCode(err, jobs.CodeAborted) {
					t.Fatalf("%s after the abort: %v (code %q), want %s", await.name, err, jobs.CodeOf(err), jobs.CodeAborted)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s did not return after the abort", await.name)
			}
		})
	}
}
