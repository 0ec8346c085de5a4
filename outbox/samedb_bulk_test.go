package outbox

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/postgres"
)

// A bulk enqueue in the caller's transaction: large enough for the store's COPY path, the runs
// exist if and only if the caller commits, idempotency holds per item (also against a run the
// same transaction created one at a time), and two bulk calls share one transaction.
func TestSameDatabaseEnqueueManyTx(t *testing.T) {
	t.Parallel()
	if !hasPostgres() {
		t.Skip("TEST_DATABASE_URL is not set")
	}
	st := testenv.OpenPostgres(t).(*postgres.Store)
	env := testenv.Start(t, testenv.Options{Store: st, Clock: clock.Real{}})
	pgURL, _ := testenv.FreshSchema(t)
	pool, err := pgxpool.New(t.Context(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	same, err := NewSameDB(env.Engine, st)
	if err != nil {
		t.Fatal(err)
	}
	notes := func(prefix string, n int) []Note {
		out := make([]Note, n)
		for i := range out {
			out[i] = Note{ID: fmt.Sprintf("%s%d", prefix, i)}
		}
		return out
	}

	// Rollback: nothing of either bulk call is left.
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"r", "s"} {
		items, err := noteJob.EnqueueManyTx(t.Context(), same.BulkTx(tx), notes(prefix, 100))
		if err != nil || len(items) != 100 || items[0].RunID == "" {
			t.Fatalf("EnqueueManyTx: %d items, %v", len(items), err)
		}
	}
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(runsOf(t, env)); n != 0 {
		t.Fatalf("a rolled-back bulk enqueue left %d runs", n)
	}

	// Commit: every item's run, none before the commit; one run per key.
	tx, err = pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	single, err := noteJob.EnqueueTx(t.Context(), same.Tx(tx), Note{ID: "c7"})
	if err != nil {
		t.Fatal(err)
	}
	in := append(notes("c", 150), Note{ID: "c3"})
	items, err := noteJob.EnqueueManyTx(t.Context(), same.BulkTx(tx), in)
	if err != nil {
		t.Fatal(err)
	}
	if it := items[7]; !it.Deduped || it.RunID != single.RunID {
		t.Errorf("the key enqueued earlier in the transaction: %+v; want %s, deduped", it, single.RunID)
	}
	if it := items[150]; !it.Deduped || it.RunID != items[3].RunID {
		t.Errorf("the key repeated in the call: %+v; want %s, deduped", it, items[3].RunID)
	}
	if _, err := env.Engine.GetRun(t.Context(), items[0].RunID); jobs.CodeOf(err) != jobs.CodeRunNotFound {
		t.Fatalf("before commit a run is visible (%v)", err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(runsOf(t, env)); n != 150 {
		t.Errorf("%d runs after commit, want 150", n)
	}
	env.Worker(workerConfig(), noteJob)
	env.Await(items[149].RunID, store.StateCompleted)

	_, err = noteJob.EnqueueManyTx(t.Context(), same.BulkTx(nil), notes("n", 1))
	wantCode(t, "no transaction", err, jobs.CodeOutboxNoTx)
}
