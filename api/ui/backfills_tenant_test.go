package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// orgAccount is a row of a table shared by tenants.
type orgAccount struct {
	ID     int
	Tenant string
}

// The backfills page names the tenant of a per-tenant backfill's passes, in the ledger and in
// the passes running now: its ledger is per (name, tenant), so two rows of one name are two
// tenants' passes, not a pass and its re-run.
func TestBackfillsPageShowsAPassTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	// org-a has 3 rows (one page: its pass completes at once), org-b 25: under the fake clock its
	// rate pause before the second page lasts until the clock moves, so its pass stays running.
	src := backfill.SourceFunc[orgAccount](func(_ context.Context, req backfill.PageRequest) ([]orgAccount, backfill.Cursor, error) {
		n := map[string]int{"org-a": 3, "org-b": 25}[req.Tenant]
		after := int64(0)
		if req.After != nil {
			v, err := backfill.ParseCount(req.After[0])
			if err != nil {
				return nil, nil, err
			}
			after = v
		}
		var out []orgAccount
		for id := int(after) + 1; id <= n && len(out) < req.Limit; id++ {
			out = append(out, orgAccount{ID: id, Tenant: req.Tenant})
		}
		if len(out) == 0 {
			return nil, nil, nil
		}
		return out, backfill.Cursor{int64(out[len(out)-1].ID)}, nil
	})
	perOrg := backfill.MustDefine("per-org-tags", backfill.PerTenant(), src,
		func(context.Context, backfill.Batch[orgAccount]) error { return nil }, backfill.BatchSize(10), backfill.Rate(2))
	env.Worker(worker.Config{ID: "org-sweeper", PollWait: 100 * time.Millisecond}, perOrg)
	done, err := perOrg.Enqueue(ctx, env.Engine, backfill.Input{Tenant: "org-a"})
	if err != nil {
		t.Fatal(err)
	}
	env.Await(done.RunID, store.StateCompleted)
	running, err := perOrg.Enqueue(ctx, env.Engine, backfill.Input{Tenant: "org-b"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the worker stops: through the pauses, so its drain finds nothing
		for range 200 {
			if r, err := env.Engine.GetRun(ctx, running.RunID); err != nil || r.State.Finished() {
				return
			}
			env.Fake().Advance(time.Second)
			time.Sleep(5 * time.Millisecond)
		}
		t.Errorf("org-b's pass did not finish")
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ps, err := env.Engine.InspectBackfills(ctx, store.BackfillFilter{RunID: running.RunID})
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) == 1 && ps[0].Rows == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("org-b's pass did not report its first page: %+v", ps)
		}
	}

	b := newBrowser(t, serveOps(t, env, nil, ""))
	st, body := b.get("/_x/backfills")
	want(t, "backfills", st, body, http.StatusOK, "<th>Tenant</th>", `tenant <span class="mono">org-b</span>`)
	for tenant, run := range map[string]string{"org-a": done.RunID, "org-b": running.RunID} {
		i := strings.Index(body, `<td class="mono nowrap">`+tenant+`</td>`)
		if i < 0 {
			t.Fatalf("the ledger has no tenant cell %s:\n%s", tenant, body)
		}
		if end := strings.Index(body[i:], "</tr>"); end < 0 || !strings.Contains(body[i:i+end], run) {
			t.Errorf("the ledger's %s cell is not in the row of its pass %s", tenant, run)
		}
	}
	if !strings.Contains(body, `title="per tenant: the worst state`) {
		t.Error("a per-tenant backfill's state does not say it is the worst of its tenants'")
	}
}
