package outbox

import (
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
)

type orgNote struct {
	Org string `json:"org"`
	ID  string `json:"id"`
}

var orgNoteJob = jobs.MustDefine("org-note",
	func(in orgNote) string { return "k:" + in.ID }, jobs.TenantFrom(func(in orgNote) string { return in.Org }),
	func(c *jobs.Ctx, in orgNote) (string, error) { return in.ID, nil })

// A row refused with X_IDEMPOTENCY_KEY_TAKEN (a live run of another tenant holds its key) is set
// aside; once that run ended, the row requeued is published as its own tenant's run. The refused
// publish had bound the row's dedupe id to the other tenant's run, so every publish of it was
// refused again for the whole dedupe retention.
func TestARowRefusedForAnotherTenantsKeyPublishesOnceRequeued(t *testing.T) {
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
			res, err := orgNoteJob.EnqueueTx(t.Context(), ob.Tx(tx), orgNote{Org: "b", ID: "1"})
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			r, err := NewRelay(RelayConfig{Store: mem, Publisher: env.Engine, ID: "r1", Clock: env.Clock, Logger: env.Logger})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Pass(t.Context()); err != nil {
				t.Fatal(err)
			}
			rows, total, _ := mem.Failed(t.Context(), 10)
			if total != 1 || rows[0].ErrorCode != jobs.CodeKeyTaken {
				t.Fatalf("failed rows %+v, want the row set aside with X_IDEMPOTENCY_KEY_TAKEN", rows)
			}
			if _, err := env.Engine.Cancel(t.Context(), other.RunID, "done"); err != nil {
				t.Fatal(err)
			}
			if n, err := mem.Requeue(t.Context(), []string{res.Staged}); err != nil || n != 1 {
				t.Fatalf("requeue: %d, %v", n, err)
			}
			n, err := r.Pass(t.Context())
			rows, total, _ = mem.Failed(t.Context(), 10)
			if n != 1 || total != 0 {
				t.Fatalf("after the holder ended and the row was requeued: published %d (%v), failed rows %+v", n, err, rows)
			}
		})
	}
}
