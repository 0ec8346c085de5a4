package backfill_test

import (
	"context"
	"slices"
	"testing"

	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// An engine serving remote workers knows the backfills they host from their manifests: a sweep
// declared and never enqueued is pending there, running once enqueued, and not pending once done.
func TestPendingComesFromTheWorkersManifests(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		tb := newTable(5)
		b := backfill.MustDefine("declared-remotely", backfill.AllTenants(), tb.source(), tb.handle, backfill.Rate(1e6))
		if r, err := env.Engine.PendingBackfills(ctx, ""); err != nil || slices.Contains(r.Pending, "declared-remotely") {
			t.Fatalf("before any worker declared it: %+v, %v", r, err)
		}
		testenv.Declare(t, env.Engine, "remote-1", b)
		r, err := env.Engine.PendingBackfills(ctx, "")
		if err != nil || !slices.Contains(r.Pending, "declared-remotely") {
			t.Fatalf("after the manifest: %+v, %v; want it pending", r, err)
		}
		d, err := env.Engine.DeclaredBackfills(ctx)
		if err != nil || len(d) != 1 || d[0].Checksum != b.Declaration().Checksum {
			t.Fatalf("declared = %+v, %v; want the worker's declaration", d, err)
		}
		startWorker(env, "test", b)
		res := enqueue(t, env, b, backfill.Input{})
		env.Await(res.RunID, store.StateCompleted)
		if r, err := env.Engine.PendingBackfills(ctx, ""); err != nil || slices.Contains(r.Pending, "declared-remotely") {
			t.Fatalf("after the pass: %+v, %v; want nothing pending", r, err)
		}
	})
}
