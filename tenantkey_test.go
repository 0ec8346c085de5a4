package jobs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
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
