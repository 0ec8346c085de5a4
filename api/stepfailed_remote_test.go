package api_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// A failed step the body went on past travels over the worker protocol like any command: a
// remote worker records it with the fallback step, and the replay after the sleep returns the
// same failure instead of charging again. On every backend.
func TestAHandledStepFailureOverHTTP(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			addr := freeAddr(t)
			e := startEngine(t, b.Open(t), addr, 20*time.Second)
			var charges atomic.Int32
			pay := jobs.MustDefine("pay-remote", func(int) string { return "k" }, jobs.NoTenant[int](),
				func(ctx *jobs.Ctx, in int) (string, error) {
					via := "card"
					if _, err := jobs.Step(ctx, "charge", func(context.Context) (int, error) {
						if charges.Add(1) == 1 {
							return 0, jobs.Errorf("X_CARD_DECLINED", "declined")
						}
						return 1, nil
					}); err != nil {
						if !jobs.HasCode(err, "X_CARD_DECLINED") {
							return "", err
						}
						via = "invoice"
						if _, err := jobs.Step(ctx, "invoice", func(context.Context) (int, error) { return 1, nil }); err != nil {
							return "", err
						}
					}
					if err := jobs.Sleep(ctx, "settle", 50*time.Millisecond); err != nil {
						return "", err
					}
					return via, nil
				})
			c, err := api.NewClient("http://"+addr, "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			reg, _ := jobs.NewRegistry(pay)
			startWorker(t, worker.Config{Frontend: c, Registry: reg, Logger: testenv.Logger(), PollWait: time.Second, StickyRuns: -1})
			res, err := pay.Enqueue(context.Background(), e.eng, 1)
			if err != nil {
				t.Fatal(err)
			}
			run := awaitState(t, e.eng, res.RunID, store.StateCompleted, 20*time.Second)
			if via, _ := pay.Result(run.Result); via != "invoice" || charges.Load() != 1 {
				t.Fatalf("result %q, charged %d times; want invoice, charged once", via, charges.Load())
			}
			evs, err := e.eng.History(context.Background(), res.RunID, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(testenv.Kinds(evs), ","); !strings.HasPrefix(got, "RunStarted,StepFailed:charge,StepCompleted:invoice,TimerStarted:settle,") {
				t.Fatalf("history %s", got)
			}
		})
	}
}
