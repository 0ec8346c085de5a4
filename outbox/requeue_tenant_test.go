package outbox

import (
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

type orgNote struct {
	Org string `json:"org"`
	ID  string `json:"id"`
}

var orgNoteJob = jobs.MustDefine("org-note",
	func(in orgNote) string { return "k:" + in.ID }, jobs.TenantFrom(func(in orgNote) string { return in.Org }),
	func(c *jobs.Ctx, in orgNote) (string, error) { return in.ID, nil })

// A row whose key a live run of another tenant holds is published at once, as its own tenant's
// run: keys are held per (job, tenant, key). It used to be refused X_IDEMPOTENCY_KEY_TAKEN and set
// aside until that run ended and the row was requeued.
func TestARowWhoseKeyAnotherTenantHoldsPublishesAsItsOwnTenantsRun(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			mem := NewMemoryStore()
			ob, err := New(Config{Store: mem, Mode: Required, Clock: env.Clock})
			if err != nil {
				t.Fatal(err)
			}
			other, err := orgNoteJob.Enqueue(t.Context(), env.Engine, orgNote{Org: "a", ID: "1"})
			if err != nil {
				t.Fatal(err)
			}
			tx := mem.Begin()
			if _, err := orgNoteJob.EnqueueTx(t.Context(), ob.Tx(tx), orgNote{Org: "b", ID: "1"}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			r, err := NewRelay(RelayConfig{Store: mem, Publisher: env.Engine, ID: "r1", Clock: env.Clock, Logger: env.Logger})
			if err != nil {
				t.Fatal(err)
			}
			n, err := r.Pass(t.Context())
			rows, total, _ := mem.Failed(t.Context(), 10)
			if n != 1 || err != nil || total != 0 {
				t.Fatalf("published %d (%v), failed rows %+v; want the row published", n, err, rows)
			}
			runs, err := env.Store.RunList(t.Context(), store.ListParams{Tenant: "b", Limit: 10})
			if err != nil || len(runs) != 1 || runs[0].ID == other.RunID || runs[0].Key != "k:1" {
				t.Fatalf("tenant b's runs: %+v %v; want one run of its own under k:1", runs, err)
			}
		})
	}
}
