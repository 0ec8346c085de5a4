package jobs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// holdFrontend holds the record carrying the step named hold until release is closed.
type holdFrontend struct {
	frontend.Frontend
	hold     string
	entered  chan struct{}
	release  chan struct{}
	enterOne sync.Once
}

func (h *holdFrontend) Record(ctx context.Context, req frontend.RecordRequest) (frontend.RecordResponse, error) {
	for _, c := range req.Commands {
		if c.Kind == frontend.CmdStep && c.Name == h.hold {
			h.enterOne.Do(func() { close(h.entered) })
			<-h.release
			break
		}
	}
	return h.Frontend.Record(ctx, req)
}

// While the record of one parallel step is in flight, the body starts a second one and that
// step's body runs: starting a step does not wait for another's record. Both results are then
// recorded and the run completes.
func TestParallelStepStartsWhileAnotherRecords(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			fe := &holdFrontend{Frontend: env.Engine, hold: "a", entered: make(chan struct{}), release: make(chan struct{})}
			bRan := make(chan struct{})
			var releaseOnce sync.Once
			release := func() { releaseOnce.Do(func() { close(fe.release) }) }
			t.Cleanup(release)
			def := jobs.MustDefine("fan2", func(in string) string { return in }, jobs.NoTenant[string](),
				func(c *jobs.Ctx, in string) (string, error) {
					a := jobs.Go(c, "a", func(context.Context) (string, error) { return "A", nil })
					<-fe.entered // a's record is in flight, and held
					bf := jobs.Go(c, "b", func(context.Context) (string, error) { close(bRan); return "B", nil })
					if err := jobs.AwaitAll(c, a, bf); err != nil {
						return "", err
					}
					av, _ := a.Await(c)
					bv, _ := bf.Await(c)
					return av + bv, nil
				})
			env.Worker(worker.Config{Frontend: fe}, def)
			res, err := def.Enqueue(t.Context(), env.Engine, "x")
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-bRan:
			case <-time.After(10 * time.Second):
				t.Error("step b did not start while step a's record was in flight")
			}
			release()
			run := env.Await(res.RunID, store.StateCompleted)
			var out string
			if err := jobs.Decode(run.Result, &out); err != nil || out != "AB" {
				t.Fatalf("result %q (%v), want AB", out, err)
			}
		})
	}
}
