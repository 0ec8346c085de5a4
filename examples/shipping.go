package examples

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/ultimat3/jobs"
)

// The shipping example fans out: it asks every carrier for a quote at once (parallel steps),
// takes the cheapest quote that came back, and has the label printed by a child run it waits
// for. The DHL quote was added while runs were in flight, behind a change point: runs that had
// already quoted keep the two-carrier branch they took, new runs ask three carriers.

// ShipmentInput is an order to ship.
type ShipmentInput struct {
	OrderID string `json:"orderId"`
	Grams   int    `json:"grams"`
}

// Quote is one carrier's price.
type Quote struct {
	Carrier string `json:"carrier"`
	Cents   int    `json:"cents"`
	// Refused is why the carrier gave no quote ("" when it did): recorded with the step.
	Refused string `json:"refused,omitempty"`
}

// Shipment is the chosen quote and its printed label.
type Shipment struct {
	Quote  Quote  `json:"quote"`
	Quotes int    `json:"quotes"`
	Label  string `json:"label"`
}

// LabelInput asks for a label.
type LabelInput struct {
	OrderID string `json:"orderId"`
	Carrier string `json:"carrier"`
}

// Job names of the shipping example.
const (
	ShippingName = "ship-order"
	LabelName    = "print-label"
	// ChangeQuoteDHL is the change point that added the DHL quote.
	ChangeQuoteDHL = "quote-dhl"
)

// PrintLabel is the child job: it renders a carrier's label for an order.
var PrintLabel = jobs.MustDefine(LabelName,
	func(in LabelInput) string { return "label:" + in.OrderID },
	jobs.NoTenant[LabelInput](),
	func(c *jobs.Ctx, in LabelInput) (string, error) {
		return jobs.Step(c, "render", func(context.Context) (string, error) {
			return fmt.Sprintf("https://labels.example/%s/%s.pdf", in.Carrier, in.OrderID), nil
		})
	},
	jobs.Queue("labels"))

// Shipping is the fan-out parent.
var Shipping = jobs.MustDefine(ShippingName,
	func(in ShipmentInput) string { return "ship:" + in.OrderID },
	jobs.NoTenant[ShipmentInput](),
	ship,
	jobs.Queue("shipping"))

func ship(c *jobs.Ctx, in ShipmentInput) (Shipment, error) {
	carriers := []string{"fedex", "ups"}
	v, err := jobs.Version(c, ChangeQuoteDHL, jobs.DefaultVersion, 1)
	if err != nil {
		return Shipment{}, err
	}
	if v >= 1 {
		carriers = append(carriers, "dhl")
	}
	return shipVia(c, in, carriers)
}

// shipVia quotes the carriers in parallel, picks the cheapest and waits for its label.
func shipVia(c *jobs.Ctx, in ShipmentInput, carriers []string) (Shipment, error) {
	quotes := make([]*jobs.Future[Quote], len(carriers))
	for i, name := range carriers {
		quotes[i] = jobs.Go(c, "quote:"+name, func(ctx context.Context) (Quote, error) {
			q, err := QuoteFor(name, in.Grams)
			if err != nil {
				// The body goes on past a refusal, and it decides the label below: it is data
				// here, a result recorded like a price, so the history and the trace read as
				// each carrier's answer. (Returned as the step's error and seen by the body, it
				// would be recorded too, as a failure a replay hands back.)
				return Quote{Carrier: name, Refused: err.Error()}, nil
			}
			return q, nil
		})
	}
	// A carrier that refuses to quote is skipped.
	var best Shipment
	var errs []error
	for _, f := range quotes {
		q, err := f.Await(c)
		if err != nil {
			return Shipment{}, err // the step itself failed (the run was cancelled, say)
		}
		if q.Refused != "" {
			errs = append(errs, errors.New(q.Refused))
			continue
		}
		best.Quotes++
		if best.Quotes == 1 || q.Cents < best.Quote.Cents {
			best.Quote = q
		}
	}
	if best.Quotes == 0 {
		return Shipment{}, errors.Join(errs...)
	}
	label, err := PrintLabel.Call(c, "label", LabelInput{OrderID: in.OrderID, Carrier: best.Quote.Carrier})
	if err != nil {
		return Shipment{}, err
	}
	best.Label = label
	return best, nil
}

// QuoteFor is a carrier's deterministic price for a parcel (a stand-in for its API).
func QuoteFor(carrier string, grams int) (Quote, error) {
	if grams <= 0 {
		return Quote{}, jobs.Errorf(jobs.CodeBadRequest, "a parcel of %d grams", grams)
	}
	h := fnv.New32a()
	h.Write([]byte(carrier))
	return Quote{Carrier: carrier, Cents: 500 + grams/10 + int(h.Sum32()%700)}, nil
}
