package examples_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/examples"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/replay"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// shippingAs is the shipping job as some deploy wrote it: carriers picks the carriers to quote.
func shippingAs(carriers func(c *jobs.Ctx) ([]string, error)) *jobs.Job[examples.ShipmentInput, examples.Shipment] {
	return jobs.MustDefine(examples.ShippingName,
		func(in examples.ShipmentInput) string { return "ship:" + in.OrderID },
		jobs.NoTenant[examples.ShipmentInput](),
		func(c *jobs.Ctx, in examples.ShipmentInput) (examples.Shipment, error) {
			names, err := carriers(c)
			if err != nil {
				return examples.Shipment{}, err
			}
			quotes := make([]*jobs.Future[examples.Quote], len(names))
			for i, n := range names {
				quotes[i] = jobs.Go(c, "quote:"+n, func(context.Context) (examples.Quote, error) { return examples.QuoteFor(n, in.Grams) })
			}
			var best examples.Shipment
			for _, f := range quotes {
				q, err := f.Await(c)
				if err != nil {
					continue
				}
				best.Quotes++
				if best.Quotes == 1 || q.Cents < best.Quote.Cents {
					best.Quote = q
				}
			}
			label, err := examples.PrintLabel.Call(c, "label", examples.LabelInput{OrderID: in.OrderID, Carrier: best.Quote.Carrier})
			best.Label = label
			return best, err
		},
		jobs.Queue("shipping"))
}

// The code before the DHL change, and two wrong ways of making it.
var (
	shippingBefore = shippingAs(func(*jobs.Ctx) ([]string, error) { return []string{"fedex", "ups"}, nil })
	// The change made without a change point: old runs would replay a call they never made.
	shippingUnversioned = shippingAs(func(*jobs.Ctx) ([]string, error) { return []string{"fedex", "ups", "dhl"}, nil })
	// The old branch deleted (min raised to 1) while a run that took it may still replay.
	shippingRetired = shippingAs(func(c *jobs.Ctx) ([]string, error) {
		if _, err := jobs.Version(c, examples.ChangeQuoteDHL, 1, 1); err != nil {
			return nil, err
		}
		return []string{"fedex", "ups", "dhl"}, nil
	})
)

// The deploy procedure of a change point, end to end: a run started under the old code is in
// flight (waiting for its label) when the new code is deployed; it finishes on the new code
// along the old branch, while a new run takes the new one. Both histories are dumped under
// testdata/ and replayed with replay.CheckFile against every version of the code.
func TestShippingVersionedAcrossADeploy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	old := b.env.Worker(worker.Config{}, shippingBefore) // no label printer yet: the run waits
	before, err := shippingBefore.Enqueue(ctx, b.env.Engine, examples.ShipmentInput{OrderID: "o-old", Grams: 1200})
	if err != nil {
		t.Fatal(err)
	}
	b.env.Await(before.RunID, store.StateSuspended)
	if err := old.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// The deploy: the new code, and the label printer.
	b.env.Worker(worker.Config{}, examples.Shipping, examples.PrintLabel)
	var got examples.Shipment
	r := b.env.Await(before.RunID, store.StateCompleted)
	if err := jobs.Decode(r.Result, &got); err != nil || got.Quotes != 2 || got.Label == "" {
		t.Fatalf("the in-flight run finished with %+v (%v), want the old branch's 2 quotes and a label", got, err)
	}
	after, err := examples.Shipping.Enqueue(ctx, b.env.Engine, examples.ShipmentInput{OrderID: "o-new", Grams: 1200})
	if err != nil {
		t.Fatal(err)
	}
	r = b.env.Await(after.RunID, store.StateCompleted)
	if err := jobs.Decode(r.Result, &got); err != nil || got.Quotes != 3 {
		t.Fatalf("the new run finished with %+v (%v), want the new branch's 3 quotes", got, err)
	}
	marked := 0
	for _, ev := range b.dump(t, after.RunID, "shipping-v1-completed.jsonl") {
		if ev.Kind == history.KindVersionMarked {
			marked++
		}
	}
	if marked != 1 {
		t.Errorf("the new run's history holds %d VersionMarked events, want 1", marked)
	}
	b.dump(t, before.RunID, "shipping-v0-completed.jsonl")

	v0 := filepath.Join("testdata", "shipping-v0-completed.jsonl")
	v1 := filepath.Join("testdata", "shipping-v1-completed.jsonl")
	for _, tc := range []struct {
		code *jobs.Job[examples.ShipmentInput, examples.Shipment]
		name string
		file string
		want jobs.Code
	}{
		{examples.Shipping, "current code", v0, ""},
		{examples.Shipping, "current code", v1, ""},
		{shippingBefore, "code before the change", v0, ""},
		{shippingBefore, "code before the change", v1, jobs.CodeReplayDiverged},
		{shippingUnversioned, "the change without a change point", v0, jobs.CodeReplayDiverged},
		{shippingRetired, "the old branch deleted", v0, jobs.CodeReplayDiverged},
		{shippingRetired, "the old branch deleted", v1, ""},
	} {
		err := replay.CheckFile(ctx, tc.code, tc.file)
		if (tc.want == "" && err != nil) || (tc.want != "" && !jobs.HasCode(err, tc.want)) {
			t.Errorf("%s replaying %s: %v, want %q", tc.name, filepath.Base(tc.file), err, tc.want)
		}
	}
}
