package jobs_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// Idempotency keys are held per (job, tenant, key): a tenant that enqueues another tenant's key
// first, delayed so that its run stays live, no longer blocks that tenant, whose enqueue gets a
// run of its own; so does a no-tenant enqueue, and each one's next enqueue is deduped onto its
// own run only. A bulk call alike, the same key for two tenants in one call included. Before,
// the other tenant's enqueue was refused X_IDEMPOTENCY_KEY_TAKEN until the squatting run ended.
func TestEachTenantHoldsItsOwnKey(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		req := func(key, tenant string) jobs.EnqueueRequest {
			r := jobs.EnqueueRequest{Job: "onboard", Key: key, Tenant: tenant, Input: []byte{0xc0}}
			if tenant == "" {
				r.NoTenant = true
			}
			return r
		}
		squat := req("onboard:beta", "acme")
		squat.Delay = time.Hour
		held, err := env.Engine.Enqueue(ctx, squat)
		if err != nil || held.Deduped {
			t.Fatalf("acme's enqueue of beta's key: %+v %v", held, err)
		}
		own := map[string]string{"acme": held.RunID}
		for _, tenant := range []string{"beta", ""} {
			res, err := env.Engine.Enqueue(ctx, req("onboard:beta", tenant))
			if err != nil || res.Deduped || res.RunID == held.RunID {
				t.Fatalf("tenant %q enqueuing beside acme's live run of the key: %+v %v, want a run of its own", tenant, res, err)
			}
			own[tenant] = res.RunID
		}
		for tenant, id := range own {
			res, err := env.Engine.Enqueue(ctx, req("onboard:beta", tenant))
			if err != nil || !res.Deduped || res.RunID != id {
				t.Fatalf("tenant %q enqueuing again: %+v %v, want its own run %s, deduped", tenant, res, err, id)
			}
			if run, err := env.Store.RunGet(ctx, id); err != nil || run.Tenant != tenant || run.NoTenant != (tenant == "") {
				t.Fatalf("tenant %q's run %s: %+v %v", tenant, id, run, err)
			}
		}
		items, err := env.Engine.EnqueueMany(ctx, []jobs.EnqueueRequest{
			req("onboard:beta", "beta"), req("onboard:gamma", "acme"), req("onboard:gamma", "gamma"),
			req("onboard:gamma", ""), req("onboard:gamma", "gamma")})
		if err != nil {
			t.Fatal(err)
		}
		if items[0].Error != nil || !items[0].Deduped || items[0].RunID != own["beta"] {
			t.Fatalf("bulk item on beta's key for beta: %+v, want beta's run, deduped", items[0])
		}
		seen := map[string]bool{}
		for i, it := range items[1:4] {
			if it.Error != nil || it.Deduped || it.RunID == "" || seen[it.RunID] {
				t.Fatalf("bulk item %d, one key for three tenants: %+v, want a run of its own", i+1, it)
			}
			seen[it.RunID] = true
		}
		if items[4].Error != nil || !items[4].Deduped || items[4].RunID != items[2].RunID {
			t.Fatalf("bulk item on a key an earlier item took for the same tenant: %+v, want %s", items[4], items[2].RunID)
		}
	})
}

// What still refuses another tenant's run: a dedupe id. Ids are one namespace across tenants, so
// an id another tenant's enqueue recorded names that tenant's run; the caller is refused
// X_IDEMPOTENCY_KEY_TAKEN, with a message that names neither that run nor its tenant, rather than
// handed the run as its own.
func TestADedupeIdOfAnotherTenantsRunIsRefused(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		req := jobs.EnqueueRequest{Job: "onboard", Key: "k1", Tenant: "beta", Input: []byte{0xc0}, DedupeID: "d-1"}
		beta, err := env.Engine.Enqueue(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := env.Engine.Enqueue(ctx, req); err != nil || !again.Deduped || again.RunID != beta.RunID {
			t.Fatalf("beta's resend: %+v %v, want beta's run, deduped", again, err)
		}
		for _, other := range []jobs.EnqueueRequest{
			{Job: "onboard", Key: "k2", Tenant: "acme", Input: []byte{0xc0}, DedupeID: "d-1"},
			{Job: "onboard", Key: "k1", NoTenant: true, Input: []byte{0xc0}, DedupeID: "d-1"},
		} {
			res, err := env.Engine.Enqueue(ctx, other)
			if !jobs.HasCode(err, jobs.CodeKeyTaken) || res.RunID != "" {
				t.Fatalf("tenant %q sending beta's dedupe id: %+v %v, want X_IDEMPOTENCY_KEY_TAKEN", other.Tenant, res, err)
			}
			if strings.Contains(err.Error(), beta.RunID) || strings.Contains(err.Error(), "beta") {
				t.Fatalf("the refusal names the other tenant's run or tenant: %v", err)
			}
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
