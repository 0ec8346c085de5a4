package examples

import (
	"context"
	"fmt"
	"time"

	"github.com/ultimat3/jobs"
)

// OrderInput is an order to fulfil.
type OrderInput struct {
	OrderID string `json:"orderId"`
	// Shop is the tenant: the order belongs to one shop of the platform.
	Shop  string `json:"shop"`
	Items []Item `json:"items"`
	// Amount is the total in cents.
	Amount int64 `json:"amount"`
}

// Item is one order line.
type Item struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// Reservation is stock set aside for an order.
type Reservation struct {
	ID    string `json:"id"`
	Units int    `json:"units"`
}

// PaymentReceived is the payload of the "payment.received" event; OrderID selects the run.
type PaymentReceived struct {
	OrderID string `json:"orderId"`
	Amount  int64  `json:"amount"`
}

// Order statuses.
const (
	OrderShipped   = "shipped"
	OrderCancelled = "cancelled"
)

// OrderResult is a finished order: shipped, or cancelled with its reservation released.
type OrderResult struct {
	Status      string `json:"status"`
	Reservation string `json:"reservation"`
	Tracking    string `json:"tracking,omitempty"`
	// Released is set when the compensation gave the reserved stock back.
	Released bool `json:"released,omitempty"`
}

// OrderSagaName is the order saga's job name.
const OrderSagaName = "order-saga"

// OrderSaga is the order saga with the default payment timeout.
var OrderSaga = NewOrderSaga(0)

// NewOrderSaga defines the order saga: reserve the stock, wait for the order's payment, then
// ship; when the payment does not come within paymentTimeout (0 for the default), or pays less
// than the order's amount, release the reservation. The release is the saga's compensation: a durable step like the others, so it
// happens exactly once even when the worker dies between the timeout and the release.
func NewOrderSaga(paymentTimeout time.Duration) *jobs.Job[OrderInput, OrderResult] {
	if paymentTimeout <= 0 {
		paymentTimeout = DefaultPaymentTimeout
	}
	return jobs.MustDefine(OrderSagaName,
		func(in OrderInput) string { return "order:" + in.OrderID },
		jobs.TenantFrom(func(in OrderInput) string { return in.Shop }),
		func(ctx *jobs.Ctx, in OrderInput) (OrderResult, error) {
			return orderSaga(ctx, in, paymentTimeout)
		},
		jobs.Queue("orders"),
	)
}

func orderSaga(ctx *jobs.Ctx, in OrderInput, paymentTimeout time.Duration) (OrderResult, error) {
	if in.OrderID == "" || len(in.Items) == 0 {
		return OrderResult{}, jobs.Errorf(jobs.CodeBadRequest, "an order needs an orderId and at least one item")
	}
	rsv, err := jobs.Step(ctx, "reserve-inventory", func(context.Context) (Reservation, error) {
		units := 0
		for _, it := range in.Items {
			if it.Qty <= 0 {
				return Reservation{}, jobs.Errorf(jobs.CodeBadRequest, "item %s: quantity %d", it.SKU, it.Qty)
			}
			units += it.Qty
		}
		return Reservation{ID: "rsv-" + in.OrderID, Units: units}, nil
	})
	if err != nil {
		return OrderResult{}, err
	}
	pay, paid, err := jobs.WaitForEvent[PaymentReceived](ctx, "payment", "payment.received", jobs.Match{"orderId": in.OrderID}, paymentTimeout)
	if err != nil {
		return OrderResult{}, err
	}
	if !paid || pay.Amount < in.Amount {
		// Compensation: give the stock back, then end the order as cancelled (an outcome, not
		// a failure: nothing about it is worth retrying).
		if _, err := jobs.Step(ctx, "release-inventory", func(context.Context) (string, error) {
			return rsv.ID, nil
		}); err != nil {
			return OrderResult{}, err
		}
		return OrderResult{Status: OrderCancelled, Reservation: rsv.ID, Released: true}, nil
	}
	tracking, err := jobs.Step(ctx, "ship", func(context.Context) (string, error) {
		return fmt.Sprintf("trk-%s-%d", in.OrderID, rsv.Units), nil
	})
	if err != nil {
		return OrderResult{}, err
	}
	return OrderResult{Status: OrderShipped, Reservation: rsv.ID, Tracking: tracking}, nil
}

// Options configure the examples' waits; zero fields take the defaults.
type Options struct {
	OnboardingSleep time.Duration
	PlanTimeout     time.Duration
	PaymentTimeout  time.Duration
}

// Registry returns a registry of the examples with their default waits.
func Registry() *jobs.Registry { return NewRegistry(Options{}) }

// NewRegistry returns a registry of the examples configured by o.
func NewRegistry(o Options) *jobs.Registry {
	reg, err := jobs.NewRegistry(NewOnboarding(o.OnboardingSleep, o.PlanTimeout), NewOrderSaga(o.PaymentTimeout),
		Shipping, PrintLabel)
	if err != nil {
		// The names differ: a refusal here is a bug in this file.
		panic(err)
	}
	return reg
}
