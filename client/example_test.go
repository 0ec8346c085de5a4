package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/client"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

type Order struct {
	ID string `json:"id"`
}

type Receipt struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

var charge = jobs.MustDefine("charge-order", func(o Order) string { return o.ID }, jobs.NoTenant[Order](),
	func(ctx *jobs.Ctx, o Order) (Receipt, error) {
		amount, err := jobs.Step(ctx, "charge", func(context.Context) (int, error) { return 42, nil })
		return Receipt{Order: o.ID, Amount: amount}, err
	})

// An in-process engine asked through the operator's API; a remote one is asked the same way
// through api.NewClient.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng, err := engine.New(engine.Config{Store: memory.New()})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer eng.Stop(context.Background())
	reg, err := jobs.NewRegistry(charge)
	if err != nil {
		log.Fatal(err)
	}
	w, err := worker.New(worker.Config{Frontend: eng, Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil { // declares the job, so the engine accepts its runs
		log.Fatal(err)
	}
	defer w.Stop(context.Background())

	var c client.Client = client.Local(eng, nil)
	run, err := charge.Enqueue(ctx, c, Order{ID: "o-1"})
	if err != nil {
		log.Fatal(err)
	}
	receipt, err := client.Wait[Receipt](ctx, c, run.RunID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(receipt.Order, receipt.Amount)
	view, err := c.GetRun(ctx, run.RunID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(view.State, view.Steps[0].Name)
	// Output:
	// o-1 42
	// completed charge
}
