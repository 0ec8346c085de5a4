package examples_test

import (
	"bytes"
	"context"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/examples"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/replay"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// -update rewrites the recorded histories under testdata/ from fresh runs. Do it only when a
// change to an example is meant to change its history; the point of the files is that old runs
// keep replaying.
var update = flag.Bool("update", false, "rewrite testdata/*.jsonl from fresh runs")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bundle is an engine on a memory store behind the API, an in-process worker hosting the
// examples, and an API client.
type bundle struct {
	env    *testenv.Env
	client *api.Client
}

func setup(t *testing.T) *bundle {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)
	c, err := api.NewClient(ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	env.Worker(worker.Config{}, examples.Onboarding, examples.OrderSaga)
	return &bundle{env: env, client: c}
}

// dump fetches a run's history through the API's history endpoint, as `engine history dump`
// does, and saves it under testdata/ when -update is set.
func (b *bundle) dump(t *testing.T, runID, file string) []history.Event {
	t.Helper()
	var buf bytes.Buffer
	if err := b.client.DumpHistory(context.Background(), runID, &buf); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(filepath.Join("testdata", file), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	events, err := history.Load(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// awaitWait waits until a suspended run's newest durable call is an event wait.
func (b *bundle) awaitWait(t *testing.T, runID string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		evs := b.env.History(runID)
		if last := evs[len(evs)-1]; last.Kind == history.KindEventWaitStarted {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("run %s never waited for an event: %v", runID, testenv.Kinds(b.env.History(runID)))
}

func TestOnboardingHistoryRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	res, err := examples.Onboarding.Enqueue(ctx, b.env.Engine, examples.OnboardingInput{OrgID: "acme", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	b.env.Await(res.RunID, store.StateSuspended)
	b.env.Advance(examples.DefaultOnboardingSleep)
	b.awaitWait(t, res.RunID)
	if _, err := b.client.Publish(ctx, "plan.chosen", examples.PlanChosen{OrgID: "acme", Plan: "pro"}); err != nil {
		t.Fatal(err)
	}
	b.env.Await(res.RunID, store.StateCompleted)

	events := b.dump(t, res.RunID, "onboarding-completed.jsonl")
	if err := replay.Check(ctx, examples.Onboarding, events); err != nil {
		t.Fatalf("the current code does not replay its own history: %v", err)
	}
	// A deploy that renamed a step must be caught by the same check.
	if err := replay.Check(ctx, renamedOnboarding(), events); !jobs.HasCode(err, jobs.CodeReplayDiverged) {
		t.Fatalf("a renamed step replays as %v, want X_REPLAY_DIVERGED", err)
	}
	// And the sleep's duration is not part of the history's names: other settings replay.
	if err := replay.Check(ctx, examples.NewOnboarding(time.Second, time.Minute), events); err != nil {
		t.Fatalf("a different sleep setting does not replay: %v", err)
	}
}

// renamedOnboarding is the onboarding as a careless deploy would change it: "seed" renamed.
func renamedOnboarding() jobs.Definition {
	return jobs.MustDefine(examples.OnboardingName,
		func(in examples.OnboardingInput) string { return "onboard:" + in.OrgID },
		jobs.TenantFrom(func(in examples.OnboardingInput) string { return in.OrgID }),
		func(ctx *jobs.Ctx, in examples.OnboardingInput) (examples.OnboardingResult, error) {
			if _, err := jobs.Step(ctx, "provision", func(context.Context) (examples.Provisioned, error) {
				return examples.Provisioned{Database: "db-" + in.OrgID}, nil
			}); err != nil {
				return examples.OnboardingResult{}, err
			}
			if _, err := jobs.Step(ctx, "seed-demo-data", func(context.Context) (examples.Seeded, error) {
				return examples.Seeded{}, nil
			}); err != nil {
				return examples.OnboardingResult{}, err
			}
			return examples.OnboardingResult{}, nil
		})
}

func TestOrderSagaShipsWhenPaid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	res, err := examples.OrderSaga.Enqueue(ctx, b.env.Engine, examples.OrderInput{OrderID: "o-1", Shop: "shop-1",
		Items: []examples.Item{{SKU: "mug", Qty: 2}}, Amount: 2400})
	if err != nil {
		t.Fatal(err)
	}
	b.awaitWait(t, res.RunID)
	// Another order's payment does not touch this one.
	if _, err := b.client.Publish(ctx, "payment.received", examples.PaymentReceived{OrderID: "o-2", Amount: 2400}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.Publish(ctx, "payment.received", examples.PaymentReceived{OrderID: "o-1", Amount: 2400}); err != nil {
		t.Fatal(err)
	}
	run := b.env.Await(res.RunID, store.StateCompleted)
	out, err := examples.OrderSaga.Result(run.Result)
	if err != nil || out.Status != examples.OrderShipped || out.Tracking != "trk-o-1-2" || out.Released {
		t.Fatalf("result = %+v, %v", out, err)
	}
	events := b.dump(t, res.RunID, "order-shipped.jsonl")
	if got := testenv.Kinds(events); !contains(got, "StepCompleted:ship") || contains(got, "StepCompleted:release-inventory") {
		t.Fatalf("history = %v", got)
	}
}

func TestOrderSagaReleasesTheReservationOnTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	res, err := examples.OrderSaga.Enqueue(ctx, b.env.Engine, examples.OrderInput{OrderID: "o-9", Shop: "shop-1",
		Items: []examples.Item{{SKU: "mug", Qty: 1}, {SKU: "tea", Qty: 3}}, Amount: 900})
	if err != nil {
		t.Fatal(err)
	}
	b.awaitWait(t, res.RunID)
	b.env.Advance(examples.DefaultPaymentTimeout)
	run := b.env.Await(res.RunID, store.StateCompleted)
	out, err := examples.OrderSaga.Result(run.Result)
	if err != nil || out.Status != examples.OrderCancelled || !out.Released || out.Reservation != "rsv-o-9" {
		t.Fatalf("result = %+v, %v", out, err)
	}
	events := b.dump(t, res.RunID, "order-payment-timeout.jsonl")
	got := testenv.Kinds(events)
	if !contains(got, "EventWaitTimedOut:payment") || !contains(got, "StepCompleted:release-inventory") || contains(got, "StepCompleted:ship") {
		t.Fatalf("history = %v", got)
	}
	// A payment after the timeout finds no wait: the order stays cancelled.
	pub, err := b.client.Publish(ctx, "payment.received", examples.PaymentReceived{OrderID: "o-9", Amount: 900})
	if err != nil || pub.Delivered != 0 {
		t.Fatalf("late payment = %+v, %v", pub, err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
