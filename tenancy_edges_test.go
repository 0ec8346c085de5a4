package jobs_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// A run carrying a tenant for a job declared NoTenant is refused before its body runs, as a run
// whose tenant is not its input's is: such a job is fleet-wide work, and an enqueue scoped to one
// tenant (which must name that tenant) had its body run over every tenant. The job's own
// enqueue, which carries no tenant, runs. The run is enqueued before any worker declares the job
// (the engine accepts undeclared jobs here), so the engine cannot refuse it at enqueue and the
// worker's own check is the one tested.
func TestARunCarryingATenantForANoTenantJobIsRefused(t *testing.T) {
	t.Parallel()
	type in struct {
		N string `json:"n"`
	}
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			var ran atomic.Int32
			fleet := jobs.MustDefine("purge-everything", func(i in) string { return i.N }, jobs.NoTenant[in](),
				func(c *jobs.Ctx, i in) (int, error) { ran.Add(1); return 1, nil })
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			input, _ := jobs.Encode(in{N: "k"})
			res, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "purge-everything", Key: "k", Tenant: "acme", Input: input})
			if err != nil {
				t.Fatal(err)
			}
			env.Worker(worker.Config{}, fleet)
			run := env.Await(res.RunID, store.StateFailed, store.StateCompleted)
			if run.State != store.StateFailed || run.ErrorCode != string(jobs.CodeJobTenantMismatch) || run.Attempt != 1 {
				t.Fatalf("run %s %s %q at attempt %d; want failed %s on its first attempt",
					run.State, run.ErrorCode, run.Error, run.Attempt, jobs.CodeJobTenantMismatch)
			}
			if !strings.Contains(run.Error, "no tenant") {
				t.Errorf("the refusal %q does not say the job is declared for no tenant", run.Error)
			}
			if n := ran.Load(); n != 0 {
				t.Fatalf("the body ran %d times", n)
			}
			ok, err := fleet.Enqueue(t.Context(), env.Engine, in{N: "k2"})
			if err != nil {
				t.Fatal(err)
			}
			if run := env.Await(ok.RunID, store.StateCompleted, store.StateFailed); run.State != store.StateCompleted || ran.Load() != 1 {
				t.Fatalf("the job's own enqueue: %s %s, body ran %d times", run.State, run.Error, ran.Load())
			}
		})
	}
}

// An all-tenants backfill is a NoTenant job: a pass enqueued under a tenant is refused before it
// opens a ledger row or reads a page, so a tenant's enqueue cannot sweep every tenant's rows again
// under a ledger of its own. The pass enqueued as declared (no tenant) sweeps every tenant.
func TestAnAllTenantsPassEnqueuedUnderATenantSweepsNothing(t *testing.T) {
	t.Parallel()
	type row struct{ ID, Tenant string }
	rows := []row{{"1", "acme"}, {"2", "globex"}, {"3", "initech"}}
	var mu sync.Mutex
	var handled []string
	src := backfill.SourceFunc[row](func(ctx context.Context, req backfill.PageRequest) ([]row, backfill.Cursor, error) {
		after := ""
		if len(req.After) > 0 {
			after, _ = req.After[0].(string)
		}
		var out []row
		for _, r := range rows {
			if r.ID > after && (req.Tenant == "" || r.Tenant == req.Tenant) && len(out) < req.Limit {
				out = append(out, r)
			}
		}
		if len(out) == 0 {
			return nil, nil, nil
		}
		return out, backfill.Cursor{out[len(out)-1].ID}, nil
	})
	bf := backfill.MustDefine("tenancy-edges-sweep-all", backfill.AllTenants(), src, func(ctx context.Context, bt backfill.Batch[row]) error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range bt.Rows {
			handled = append(handled, r.Tenant)
		}
		return nil
	})
	taken := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := handled
		handled = nil
		return out
	}
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			// Enqueued before the worker declares the job, so that the worker's check is tested
			// (TestANoTenantJobIsRefusedATenantAtEnqueue covers the engine's).
			input, _ := jobs.Encode(backfill.Input{})
			res, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: bf.Name(), Key: "again", Tenant: "acme", Input: input})
			if err != nil {
				t.Fatal(err)
			}
			env.Worker(worker.Config{}, bf)
			run := env.Await(res.RunID, store.StateFailed, store.StateCompleted)
			if run.State != store.StateFailed || run.ErrorCode != string(jobs.CodeJobTenantMismatch) {
				t.Fatalf("the pass under tenant acme: %s %s %q; want failed %s", run.State, run.ErrorCode, run.Error, jobs.CodeJobTenantMismatch)
			}
			if got := taken(); len(got) != 0 {
				t.Fatalf("the refused pass handled rows of %v", got)
			}
			if ps, err := env.Engine.InspectBackfills(t.Context(), store.BackfillFilter{Name: bf.Name(), Tenant: "acme"}); err != nil || len(ps) != 0 {
				t.Fatalf("the refused pass's ledger under acme: %+v (%v), want none", ps, err)
			}
			ok, err := bf.Enqueue(t.Context(), env.Engine, backfill.Input{})
			if err != nil {
				t.Fatal(err)
			}
			if run := env.Await(ok.RunID, store.StateCompleted, store.StateFailed); run.State != store.StateCompleted {
				t.Fatalf("the declared pass: %s %s", run.State, run.Error)
			}
			if got := taken(); len(got) != len(rows) {
				t.Fatalf("the declared pass handled %v, want every tenant's rows", got)
			}
		})
	}
}

// Once a worker has declared a NoTenant job, the engine refuses at enqueue a run of it that names
// a tenant (X_JOB_TENANT_MISMATCH) and creates nothing: the run does not hold its key, so the
// job's own enqueue of the same key, or a schedule's next occurrence, is not refused meanwhile.
// A bulk item is refused alike, the others created. A tenant-scoped job is not affected.
func TestANoTenantJobIsRefusedATenantAtEnqueue(t *testing.T) {
	t.Parallel()
	type in struct {
		N string `json:"n"`
	}
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fleet := jobs.MustDefine("purge-all-at-enqueue", func(i in) string { return i.N }, jobs.NoTenant[in](),
				func(c *jobs.Ctx, i in) (int, error) { return 1, nil })
			env := testenv.Start(t, testenv.Options{Store: b.Open(t), RequireDeclared: true})
			env.Worker(worker.Config{}, fleet, tenantSync())
			input, _ := jobs.Encode(in{N: "k"})
			_, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "purge-all-at-enqueue", Key: "k", Tenant: "acme", Input: input})
			if !jobs.HasCode(err, jobs.CodeJobTenantMismatch) || !strings.Contains(err.Error(), "no tenant") {
				t.Fatalf("enqueue with a tenant: %v; want %s saying the job has no tenant", err, jobs.CodeJobTenantMismatch)
			}
			res, err := fleet.Enqueue(t.Context(), env.Engine, in{N: "k"})
			if err != nil || res.Deduped {
				t.Fatalf("the job's own enqueue of the same key: %+v, %v; want a new run", res, err)
			}
			if run := env.Await(res.RunID, store.StateCompleted, store.StateFailed); run.State != store.StateCompleted || run.Tenant != "" {
				t.Fatalf("the job's own run: %s %q tenant %q", run.State, run.Error, run.Tenant)
			}
			out, err := env.Engine.EnqueueMany(t.Context(), []jobs.EnqueueRequest{
				{Job: "purge-all-at-enqueue", Key: "b1", Tenant: "acme", Input: input},
				{Job: "purge-all-at-enqueue", Key: "b2", NoTenant: true, Input: input},
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 2 || out[0].Error == nil || out[0].Error.Code != jobs.CodeJobTenantMismatch || out[0].RunID != "" ||
				out[1].Error != nil || out[1].RunID == "" {
				t.Fatalf("bulk: %+v; want the tenant's item refused and the other created", out)
			}
			row, _ := jobs.Encode(tenantRow{N: "t1", T: "acme"})
			if _, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "tsync", Key: "t1", Tenant: "acme", Input: row}); err != nil {
				t.Fatalf("a tenant-scoped job's enqueue: %v", err)
			}
		})
	}
}

type tenantRow struct {
	N string `json:"n"`
	T string `json:"t"`
}

// tenantSync is a no-op job on queue "tsync" whose tenant is its input's t, limited by opts.
func tenantSync(opts ...jobs.Option) *jobs.Job[tenantRow, int] {
	return jobs.MustDefine("tsync", func(in tenantRow) string { return in.N }, jobs.TenantFrom(func(in tenantRow) string { return in.T }),
		func(*jobs.Ctx, tenantRow) (int, error) { return 0, nil }, append([]jobs.Option{jobs.Queue("tsync")}, opts...)...)
}

func pollTsync(t *testing.T, env *testenv.Env) []frontend.Task {
	t.Helper()
	tasks, err := env.Engine.Poll(t.Context(), frontend.PollRequest{WorkerID: "w", Queues: []string{"tsync"}, Max: 20})
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

// A keyed limit counted by an input field counts a run under its own tenant's values: a run
// enqueued under tenant acme whose input names "other" (the worker refuses it later, its tenant
// not being its input's) took other's slot and spent other's rate at claim, so other's own run
// then waited out the period (or the slot). Within a tenant, and for runs of no tenant, the
// limits hold as before.
func TestAKeyedLimitByInputCountsWithinTheRunsTenant(t *testing.T) {
	t.Parallel()
	for _, lim := range []struct {
		name, why string
		opt       jobs.Option
	}{
		{"rate", `rate limited by input.t = "other" in tenant "other" until `, jobs.RateBy(jobs.ByInput("t"), 1, time.Hour)},
		{"cap", `keyed concurrency cap for input.t = "other" in tenant "other" (`, jobs.ConcurrencyBy(jobs.ByInput("t"), 1)},
	} {
		for _, b := range testenv.Backends() {
			t.Run(lim.name+"/"+b.Name, func(t *testing.T) {
				t.Parallel()
				env := testenv.Start(t, testenv.Options{Store: b.Open(t), RequireDeclared: true})
				j := tenantSync(lim.opt)
				testenv.Declare(t, env.Engine, "w", j)
				input, _ := jobs.Encode(tenantRow{N: "evil", T: "other"})
				if _, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "tsync", Key: "evil", Tenant: "acme", Input: input}); err != nil {
					t.Fatal(err)
				}
				if n := len(pollTsync(t, env)); n != 1 {
					t.Fatalf("acme's run: %d claimed", n)
				}
				// Held running (cap) or counted (rate): other's own run still starts.
				legit := enqueue(t, env, j, tenantRow{N: "legit", T: "other"})
				if got := pollTsync(t, env); len(got) != 1 || got[0].RunID != legit {
					run, why := waiting(t, env, legit)
					t.Fatalf("other's own run was not claimed (%d tasks): %s, %q; acme's run spent other's %s", len(got), run.State, why, lim.name)
				}
				// Other's own limit holds.
				next := enqueue(t, env, j, tenantRow{N: "legit-2", T: "other"})
				if got := pollTsync(t, env); len(got) != 0 {
					t.Fatalf("other's second run was claimed over its %s", lim.name)
				}
				if _, why := waiting(t, env, next); !strings.Contains(why, lim.why) {
					t.Errorf("waiting: %q, want %q", why, lim.why)
				}
				// And acme's own value "other" is spent by acme's first run.
				input, _ = jobs.Encode(tenantRow{N: "evil-2", T: "other"})
				if _, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "tsync", Key: "evil-2", Tenant: "acme", Input: input}); err != nil {
					t.Fatal(err)
				}
				if got := pollTsync(t, env); len(got) != 0 {
					t.Fatalf("acme's second run under value other was claimed over acme's %s", lim.name)
				}
			})
		}
	}
}

// Runs of no tenant keep the keys they always had: a keyed limit by an input field still counts
// them all together per value, and `jobs show` names no tenant.
func TestAKeyedLimitByInputOfNoTenantRunsIsShared(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t, testenv.Options{Store: b.Open(t), RequireDeclared: true})
			j := jobs.MustDefine("tsync", func(in tenantRow) string { return in.N }, jobs.NoTenant[tenantRow](),
				func(*jobs.Ctx, tenantRow) (int, error) { return 0, nil }, jobs.Queue("tsync"),
				jobs.RateBy(jobs.ByInput("t"), 1, time.Hour))
			testenv.Declare(t, env.Engine, "w", j)
			ids := []string{enqueue(t, env, j, tenantRow{N: "1", T: "x"}), enqueue(t, env, j, tenantRow{N: "2", T: "x"})}
			got := pollTsync(t, env)
			if len(got) != 1 {
				t.Fatalf("%d runs of value x started within the hour, want 1", len(got))
			}
			held := ids[0]
			if got[0].RunID == held {
				held = ids[1]
			}
			if _, why := waiting(t, env, held); !strings.Contains(why, `rate limited by input.t = "x" until `) {
				t.Errorf("waiting: %q", why)
			}
		})
	}
}

// The cascade of a cancel is the parent's: cancelling a parent cancels its children whatever
// their tenant (the seed's rule). But the reason written into a child of another tenant does not
// name the parent's run, whose id that tenant is shown nowhere else; a child of the parent's own
// tenant is told which parent. Both ways: the cascade after the parent's cancel, and the cancel
// of a child whose link was written after its parent was cancelled.
func TestACascadeIntoAnotherTenantsChildDoesNotNameTheParent(t *testing.T) {
	t.Parallel()
	key := func(i tenantRow) string { return i.N }
	byInput := jobs.TenantFrom(func(i tenantRow) string { return i.T })
	lastCancel := func(t *testing.T, env *testenv.Env, id string) string {
		t.Helper()
		run := env.Await(id, store.StateCancelled)
		evs := env.History(id)
		last, err := evs[len(evs)-1].Decode()
		c, ok := last.(history.RunCancelled)
		if err != nil || !ok {
			t.Fatalf("run %s's last event: %+v, %v", id, last, err)
		}
		// The reason, and the run's error, which its view shows.
		return c.Reason + "\n" + run.Error
	}
	for _, b := range testenv.Backends() {
		t.Run("cascade/"+b.Name, func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			nap := jobs.MustDefine("cx-nap", key, byInput, func(c *jobs.Ctx, i tenantRow) (int, error) {
				return 1, jobs.Sleep(c, "nap", 2*time.Hour)
			})
			parent := jobs.MustDefine("cx-fan", key, byInput, func(c *jobs.Ctx, i tenantRow) (int, error) {
				if _, err := nap.StartChild(c, "theirs", tenantRow{N: i.N + "-acme", T: "acme"}); err != nil {
					return 0, err
				}
				if _, err := nap.StartChild(c, "ours", tenantRow{N: i.N + "-own", T: i.T}); err != nil {
					return 0, err
				}
				return 1, jobs.Sleep(c, "wait", 3*time.Hour)
			})
			env.Worker(worker.Config{}, nap, parent)
			res, err := parent.Enqueue(t.Context(), env.Engine, tenantRow{N: "p", T: "other"})
			if err != nil {
				t.Fatal(err)
			}
			env.Await(res.RunID, store.StateSuspended)
			v, err := env.Engine.InspectRun(t.Context(), res.RunID)
			if err != nil || len(v.Children) != 2 {
				t.Fatalf("children %+v (%v)", v.Children, err)
			}
			kids := map[string]string{}
			for _, k := range v.Children {
				kids[k.Name] = k.RunID
				env.Await(k.RunID, store.StateSuspended)
			}
			if _, err := env.Engine.Cancel(t.Context(), res.RunID, "mine"); err != nil {
				t.Fatal(err)
			}
			if why := lastCancel(t, env, kids["theirs"]); strings.Contains(why, res.RunID) || !strings.Contains(why, "its parent run was cancelled") {
				t.Errorf("acme's child, cancelled with other's parent: %q; want no parent id", why)
			}
			if why := lastCancel(t, env, kids["ours"]); !strings.Contains(why, "parent "+res.RunID+" was cancelled") {
				t.Errorf("other's own child: %q; want its parent named", why)
			}
		})
		t.Run("late-link/"+b.Name, func(t *testing.T) {
			t.Parallel()
			g := &linkGate{Store: b.Open(t), at: make(chan struct{}, 1), release: make(chan struct{})}
			env := testenv.Start(t, testenv.Options{Store: g})
			child := jobs.MustDefine("cx-gated-child", key, byInput, func(c *jobs.Ctx, i tenantRow) (int, error) {
				return 1, jobs.Sleep(c, "nap", time.Hour)
			})
			parent := jobs.MustDefine("cx-gated-parent", key, byInput, func(c *jobs.Ctx, i tenantRow) (int, error) {
				h, err := child.StartChild(c, "kid", tenantRow{N: i.N + "-acme", T: "acme"})
				if err != nil {
					return 0, err
				}
				return h.Wait(c)
			})
			env.Worker(worker.Config{}, child, parent)
			res, err := parent.Enqueue(t.Context(), env.Engine, tenantRow{N: "p", T: "other"})
			if err != nil {
				t.Fatal(err)
			}
			<-g.at // the child run exists; its link is about to be written
			if _, err := env.Engine.Cancel(t.Context(), res.RunID, "operator"); err != nil {
				t.Fatal(err)
			}
			close(g.release)
			env.Await(res.RunID, store.StateCancelled)
			kids, err := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "cx-gated-child"})
			if err != nil || len(kids) != 1 {
				t.Fatalf("%d children (%v)", len(kids), err)
			}
			if why := lastCancel(t, env, kids[0].ID); strings.Contains(why, res.RunID) || !strings.Contains(why, "its parent run was cancelled") {
				t.Errorf("acme's child, linked after other's parent was cancelled: %q; want no parent id", why)
			}
		})
	}
}

// Declarations keyed by different keys all hold, within a tenant, now that an input key counts
// per tenant (keyed_test.go's keyedCapsOfDifferentKeys crossed tenants to show it): a cap per n,
// whose value differs on nearly every run, cannot replace the cap per customer, and binds where
// two runs of one tenant share an n.
func TestKeyedCapsOfDifferentKeysAllHoldWithinATenant(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t, testenv.Options{Store: b.Open(t), RequireDeclared: true})
			honest := syncJob(jobs.ConcurrencyBy(jobs.ByInput("customer"), 2))
			testenv.Declare(t, env.Engine, "honest", honest)
			testenv.Declare(t, env.Engine, "other", syncJob(jobs.ConcurrencyBy(jobs.ByInput("n"), 1)))
			var again string
			for _, in := range []syncInput{{"a", 0}, {"a", -1}, {"a", 1}, {"a", 2}, {"a", 3}, {"b", 0}} {
				if in.N >= 0 {
					enqueue(t, env, honest, in)
				} else { // a second run of tenant a with n = 0, under a key of its own
					input, _ := jobs.Encode(syncInput{Customer: "a", N: 0})
					res, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "sync", Key: "a-0-again", Tenant: "a", Input: input})
					if err != nil {
						t.Fatal(err)
					}
					again = res.RunID
				}
				env.Fake().Advance(time.Millisecond)
			}
			got := customers(t, pollAll(t, env.Engine, "honest"))
			// a-0 and a-1 fill a's two slots; a-0-again finds n = 0 of tenant a taken; b-0 runs.
			if got["a"] != 2 || got["b"] != 1 {
				t.Fatalf("claimed per customer %v, want a:2 b:1", got)
			}
			if _, why := waiting(t, env, again); !strings.Contains(why, `input.n = "0" in tenant "a"`) {
				t.Errorf("a-0-again waiting: %q, want the cap per n of tenant a", why)
			}
		})
	}
}
