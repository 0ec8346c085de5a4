package jobs_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// A key held by a live run of another tenant is refused, in a single and in a bulk enqueue, with
// a message that names neither that run nor its tenant; the same tenant's enqueue still gets its
// own live run back. Without the check the caller was handed the other tenant's run as its own.
func TestAKeyHeldByAnotherTenantIsRefused(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		req := func(key, tenant string) jobs.EnqueueRequest {
			r := jobs.EnqueueRequest{Job: "onboard", Key: key, Tenant: tenant, Input: []byte{0xc0}}
			if tenant == "" {
				r.NoTenant = true
			}
			return r
		}
		beta, err := env.Engine.Enqueue(ctx, req("onboard:beta", "beta"))
		if err != nil {
			t.Fatal(err)
		}
		same, err := env.Engine.Enqueue(ctx, req("onboard:beta", "beta"))
		if err != nil || !same.Deduped || same.RunID != beta.RunID {
			t.Fatalf("the same tenant's enqueue: %+v %v, want beta's run back, deduped", same, err)
		}
		for _, other := range []string{"acme", ""} {
			res, err := env.Engine.Enqueue(ctx, req("onboard:beta", other))
			if !jobs.HasCode(err, jobs.CodeKeyTaken) {
				t.Fatalf("tenant %q enqueuing beta's key: %+v %v, want X_IDEMPOTENCY_KEY_TAKEN", other, res, err)
			}
			if strings.Contains(err.Error(), beta.RunID) || strings.Contains(err.Error(), `"beta"`) {
				t.Fatalf("the refusal names the other tenant's run or tenant: %v", err)
			}
		}
		items, err := env.Engine.EnqueueMany(ctx, []jobs.EnqueueRequest{
			req("onboard:beta", "acme"), req("onboard:acme", "acme"), req("onboard:acme", "gamma")})
		if err != nil {
			t.Fatal(err)
		}
		if !jobs.HasCode(items[0].Error, jobs.CodeKeyTaken) || items[0].RunID != "" {
			t.Fatalf("bulk item on beta's key: %+v, want X_IDEMPOTENCY_KEY_TAKEN and no run", items[0])
		}
		if items[1].Error != nil || items[1].Deduped || items[1].RunID == "" {
			t.Fatalf("bulk item on a free key: %+v, want a new run", items[1])
		}
		// The same key twice in one call for two tenants: the second is not handed the first's run.
		if !jobs.HasCode(items[2].Error, jobs.CodeKeyTaken) || items[2].RunID != "" {
			t.Fatalf("bulk item on a key an earlier item took for another tenant: %+v", items[2])
		}
	})
}

// An untyped enqueue names the tenant beside the input; a run whose tenant is not the one its job
// derives from that input is refused before the body runs, terminally, so a caller scoped to one
// tenant cannot have the body act on another tenant's org under its own tenant's name.
func TestARunWhoseTenantIsNotItsInputsIsRefused(t *testing.T) {
	type org struct {
		OrgID string `json:"orgId"`
	}
	var ran atomic.Int32
	provision := jobs.MustDefine("provision", func(o org) string { return "provision:" + o.OrgID },
		jobs.TenantFrom(func(o org) string { return o.OrgID }),
		func(c *jobs.Ctx, o org) (string, error) { ran.Add(1); return "db-" + o.OrgID, nil })
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		env.Worker(worker.Config{}, provision)
		input, _ := jobs.Encode(org{OrgID: "victim"})
		res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "provision", Key: "provision:victim", Tenant: "acme", Input: input})
		if err != nil {
			t.Fatal(err)
		}
		run := env.Await(res.RunID, store.StateFailed, store.StateCompleted)
		if run.State != store.StateFailed || run.ErrorCode != string(jobs.CodeJobTenantMismatch) || run.Attempt != 1 {
			t.Fatalf("run %s %s %q at attempt %d; want failed X_JOB_TENANT_MISMATCH on its first attempt", run.State, run.ErrorCode, run.Error, run.Attempt)
		}
		if n := ran.Load(); n != 0 {
			t.Fatalf("the body ran %d times", n)
		}
		// The typed enqueue, which derives the tenant, runs.
		ok, err := provision.Enqueue(ctx, env.Engine, org{OrgID: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		if run := env.Await(ok.RunID, store.StateCompleted, store.StateFailed); run.State != store.StateCompleted {
			t.Fatalf("the typed enqueue's run %s %s", run.State, run.Error)
		}
		ran.Store(0)
	})
}
