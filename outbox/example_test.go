package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/outbox"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

type Order struct {
	ID    string `json:"id"`
	Email string `json:"email"`
}

// SendReceipt is enqueued in the same transaction that saves the order: no order without its
// receipt, no receipt for an order that was rolled back.
var SendReceipt = jobs.MustDefine("send-receipt",
	func(o Order) string { return "receipt:" + o.ID }, jobs.NoTenant[Order](),
	func(ctx *jobs.Ctx, o Order) (string, error) {
		msg, err := jobs.Step(ctx, "email", func(context.Context) (string, error) {
			return "receipt for " + o.ID + " sent to " + o.Email, nil
		})
		if err != nil {
			return "", err
		}
		// Durable calls that act beyond the run: recorded in its history, done once however
		// often the run is retried or replayed.
		if _, err := jobs.Publish(ctx, "receipt.sent", o); err != nil {
			return "", err
		}
		if _, err := Archive.EnqueueFrom(ctx, "archive", o); err != nil {
			return "", err
		}
		return msg, nil
	})

var Archive = jobs.MustDefine("archive-order",
	func(o Order) string { return "archive:" + o.ID }, jobs.NoTenant[Order](),
	func(ctx *jobs.Ctx, o Order) (string, error) { return "archived " + o.ID, nil })

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)

	// The engine (in-process here; an api.Client works the same) and a worker.
	eng, _ := engine.New(engine.Config{Store: memory.New()})
	_ = eng.Start(ctx)
	defer eng.Stop(ctx)
	reg, _ := jobs.NewRegistry(SendReceipt, Archive)
	w, _ := worker.New(worker.Config{Frontend: eng, Registry: reg})
	_ = w.Start(ctx)
	defer w.Stop(ctx)

	// The application's own database, with the outbox table beside its tables.
	// busy_timeout: the relay's statements and the app's transactions share one SQLite file.
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	defer db.Close()
	_, _ = db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, email TEXT)`)
	obStore, _ := outbox.NewSQLiteStore(db, "")
	_ = obStore.Migrate(ctx)
	ob, _ := outbox.New(outbox.Config{Store: obStore, Mode: outbox.Required})
	relay, _ := outbox.NewRelay(outbox.RelayConfig{Store: obStore, Publisher: eng, Interval: 10 * time.Millisecond})
	_ = relay.Start(ctx)
	defer relay.Stop(ctx) // joins the pass in flight: stop it before closing the database

	// Save the order and stage its receipt in ONE transaction.
	order := Order{ID: "o-1", Email: "ada@example.com"}
	tx, _ := db.BeginTx(ctx, nil)
	_, _ = tx.Exec(`INSERT INTO orders VALUES (?, ?)`, order.ID, order.Email)
	staged, err := SendReceipt.EnqueueTx(ctx, ob.Tx(outbox.SQL(tx)), order)
	fmt.Println("staged:", staged.Staged != "", err)
	_ = tx.Commit()

	// Outside a transaction, a required outbox refuses.
	_, err = SendReceipt.Enqueue(ctx, ob, Order{ID: "o-2"})
	fmt.Println(jobs.CodeOf(err))

	run := awaitRun(eng, "send-receipt")
	view, _ := eng.InspectRun(ctx, run.ID)
	for _, s := range view.Steps {
		fmt.Println(s.Kind, s.Name, s.Status)
	}
	fmt.Println("archive:", awaitRun(eng, "archive-order").State)
	// Output:
	// staged: true <nil>
	// X_OUTBOX_NO_TX
	// step email completed
	// publish publish:receipt.sent published
	// enqueue archive enqueued
	// archive: completed
}

// awaitRun polls until the job's one run completed.
func awaitRun(eng *engine.Engine, job string) store.Run {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		runs, _ := eng.ListRuns(context.Background(), store.ListParams{Job: job})
		if len(runs) == 1 && runs[0].State == store.StateCompleted {
			return runs[0]
		}
		time.Sleep(5 * time.Millisecond)
	}
	return store.Run{}
}
