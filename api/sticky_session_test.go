package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// A run parked in a remote worker that dies (its session connection drops, it says nothing) is
// no longer reserved for it once the session grace passes: its wake-up goes to any worker at
// once instead of waiting out the sticky window for a process that is gone. On every backend.
func TestDroppedSessionEndsStickyReservations(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			st := b.Open(t)
			addr := freeAddr(t)
			e := startEngine(t, st, addr, 20*time.Second)
			napper := jobs.MustDefine("napper", func(int) string { return "k" }, jobs.NoTenant[int](),
				func(ctx *jobs.Ctx, in int) (int, error) {
					if err := jobs.Sleep(ctx, "nap", time.Hour); err != nil {
						return 0, err
					}
					return in, nil
				})
			kt := newKillableTransport()
			c, err := api.NewClient("http://"+addr, "", api.WithHTTPClient(&http.Client{Transport: kt}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			reg, _ := jobs.NewRegistry(napper)
			doomed, err := worker.New(worker.Config{Frontend: c, Registry: reg, Logger: testenv.Logger(), PollWait: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := doomed.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = doomed.Stop(ctx)
			}()
			res, err := napper.Enqueue(context.Background(), e.eng, 1)
			if err != nil {
				t.Fatal(err)
			}
			run := awaitState(t, e.eng, res.RunID, store.StateSuspended, 10*time.Second)
			if run.WorkerID != doomed.ID() {
				t.Fatalf("the parked run is reserved for %q, want the worker that parked it (%q)", run.WorkerID, doomed.ID())
			}
			awaitSession(t, e.eng, doomed.ID())
			kt.kill()
			// The grace is 1s by default; the lease (20s) and the nap (1h) are far off, so only the
			// dropped session can end the reservation.
			deadline := time.Now().Add(8 * time.Second)
			for {
				run, err = e.eng.GetRun(context.Background(), res.RunID)
				if err != nil {
					t.Fatal(err)
				}
				if run.WorkerID == "" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("8s after the worker died its parked run is still reserved for %q", run.WorkerID)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if run.State != store.StateSuspended || run.Attempt != 1 {
				t.Errorf("released run is %s at attempt %d, want still suspended at attempt 1", run.State, run.Attempt)
			}
		})
	}
}
