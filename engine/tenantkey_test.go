package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// crossTenant is a store that breaks RunCreate's contract: it answers every create with a live
// run of another tenant, deduped.
type crossTenant struct {
	store.Store
	other store.Run
}

func (c *crossTenant) answer(ps []store.CreateRunParams) []store.CreateRunResult {
	out := make([]store.CreateRunResult, len(ps))
	for i := range out {
		out[i] = store.CreateRunResult{Run: c.other, Deduped: true}
	}
	return out
}

func (c *crossTenant) RunCreate(_ context.Context, ps []store.CreateRunParams) ([]store.CreateRunResult, error) {
	return c.answer(ps), nil
}

func (c *crossTenant) RunCreateBulk(_ context.Context, ps []store.CreateRunParams) ([]store.CreateRunResult, error) {
	return c.answer(ps), nil
}

// A key never finds another tenant's run (store.LiveKey), so a store that answers one broke its
// contract: the enqueue, single or bulk, is refused X_INVARIANT, and the caller is not handed
// that run's id.
func TestAnotherTenantsRunForAKeyIsAnInvariantFailure(t *testing.T) {
	other := store.Run{ID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", Job: "onboard", Key: "k", Tenant: "beta", State: store.StateReady}
	eng := startEngine(t, &crossTenant{Store: memory.New(), other: other})
	ctx := context.Background()
	req := jobs.EnqueueRequest{Job: "onboard", Key: "k", Tenant: "acme", Input: []byte{0xc0}}
	res, err := eng.Enqueue(ctx, req)
	if !jobs.HasCode(err, jobs.CodeInvariant) || res.RunID != "" {
		t.Fatalf("Enqueue: %+v %v, want X_INVARIANT and no run", res, err)
	}
	if strings.Contains(err.Error(), other.ID) {
		t.Errorf("the refusal names the other tenant's run: %v", err)
	}
	items, err := eng.EnqueueMany(ctx, []jobs.EnqueueRequest{req})
	if err != nil || len(items) != 1 || !jobs.HasCode(items[0].Error, jobs.CodeInvariant) || items[0].RunID != "" {
		t.Fatalf("EnqueueMany: %+v %v, want the item refused X_INVARIANT with no run", items, err)
	}
	// The same tenant's run is its own, deduped.
	req.Tenant = "beta"
	if res, err := eng.Enqueue(ctx, req); err != nil || !res.Deduped || res.RunID != other.ID {
		t.Fatalf("the same tenant's Enqueue: %+v %v, want its run, deduped", res, err)
	}
}
