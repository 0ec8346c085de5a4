package outbox

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/postgres"
)

// When the application's Postgres is the engine's store, the run itself is written in the
// caller's transaction: it exists if and only if the caller commits.
func TestSameDatabaseEnqueueTx(t *testing.T) {
	t.Parallel()
	if !hasPostgres() {
		t.Skip("TEST_DATABASE_URL is not set")
	}
	st := testenv.OpenPostgres(t).(*postgres.Store)
	env := testenv.Start(t, testenv.Options{Store: st, Clock: clock.Real{}})
	env.Worker(workerConfig(), noteJob)
	pgURL, schema := testenv.FreshSchema(t)
	pool, err := pgxpool.New(t.Context(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(t.Context(), "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+".orders (id text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	same, err := NewSameDB(env.Engine, st)
	if err != nil {
		t.Fatal(err)
	}

	// Commit: the order and the run appear together.
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "INSERT INTO "+schema+".orders VALUES ('o1')"); err != nil {
		t.Fatal(err)
	}
	res, err := noteJob.EnqueueTx(t.Context(), same.Tx(tx), Note{ID: "o1"})
	if err != nil || res.RunID == "" || res.Deduped {
		t.Fatalf("EnqueueTx: %+v, %v", res, err)
	}
	again, err := noteJob.EnqueueTx(t.Context(), same.Tx(tx), Note{ID: "o1"})
	if err != nil || again.RunID != res.RunID || !again.Deduped {
		t.Errorf("a second enqueue of the key in the transaction: %+v, %v; want run %s, deduped", again, err, res.RunID)
	}
	if _, err := env.Engine.GetRun(t.Context(), res.RunID); jobs.CodeOf(err) != jobs.CodeRunNotFound {
		t.Fatalf("before commit the run is visible (%v)", err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	env.Await(res.RunID, store.StateCompleted)

	// Rollback: neither.
	tx, err = pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	gone, err := noteJob.EnqueueTx(t.Context(), same.Tx(tx), Note{ID: "o2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Engine.GetRun(t.Context(), gone.RunID); jobs.CodeOf(err) != jobs.CodeRunNotFound {
		t.Errorf("a rolled-back enqueue left its run (%v)", err)
	}
	if len(runsOf(t, env)) != 1 {
		t.Errorf("runs %v, want only o1's", runsOf(t, env))
	}

	_, err = noteJob.EnqueueTx(t.Context(), same.Tx(nil), Note{ID: "o3"})
	wantCode(t, "no transaction", err, jobs.CodeOutboxNoTx)
	other := testenv.OpenPostgres(t).(*postgres.Store)
	_, err = NewSameDB(env.Engine, other)
	wantCode(t, "another store", err, jobs.CodeInvariant)
}
