package store

import (
	"context"
	"time"
)

// OnceParams creates one run on behalf of a request that may be sent more than once.
type OnceParams struct {
	// ID names the request (an outbox row's id, a run's durable enqueue call). Within the
	// retention window a second request with the same ID creates nothing: it gets the run the
	// first one made, whatever state that run is in by now.
	ID     string
	Create CreateRunParams
}

// Deduper remembers which request created which run, beyond the run's live states. Idempotency
// by (Job, Key) only covers a run that is still live, so a resend landing after the first run
// finished would start a second one; a dedupe id closes that window.
type Deduper interface {
	// RunCreateOnce creates p.Create's run as RunCreate does (a live run holding its (Job,
	// Tenant, Key) is returned Deduped), unless p.ID is recorded: then the run recorded under p.ID
	// is returned, Deduped, whatever its tenant (ids are one namespace; the engine refuses a
	// request whose id names another tenant's run), and nothing is written. Otherwise p.ID → the
	// returned run, which is the request's tenant's, is recorded, at p.Create.Run.CreatedAt, in
	// the same transaction as the run. Two concurrent calls with one ID create at most one run
	// and return the same run.
	RunCreateOnce(ctx context.Context, p OnceParams) (CreateRunResult, error)

	// DedupePrune forgets the ids recorded before before; it returns how many.
	DedupePrune(ctx context.Context, before time.Time) (int, error)
}

// SameTenant reports whether two runs belong to one tenant (or both to none): a run of another
// tenant is not a request's to be handed.
func SameTenant(a, b Run) bool { return a.Tenant == b.Tenant && a.NoTenant == b.NoTenant }

// LiveKey is what a live run holds: one live run per (Job, Tenant, Key), a no-tenant run's Tenant
// being "" as every store keeps it. Two tenants' runs may each hold the same (Job, Key) at once,
// and neither is ever another tenant's enqueue's dedupe.
type LiveKey struct{ Job, Tenant, Key string }

// LiveKey is the key r holds while it is live.
func (r *Run) LiveKey() LiveKey { return LiveKey{Job: r.Job, Tenant: r.Tenant, Key: r.Key} }
