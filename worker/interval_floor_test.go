package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// hasty is an engine that names intervals of a nanosecond: a manifest resend and a lease (a bug,
// or not our engine). It counts what the worker sends it.
type hasty struct {
	frontend.Frontend
	manifests, heartbeats atomic.Int64
}

func (h *hasty) DeclareManifest(ctx context.Context, m frontend.Manifest) (frontend.ManifestResponse, error) {
	h.manifests.Add(1)
	resp, err := h.Frontend.DeclareManifest(ctx, m)
	resp.Resend = time.Nanosecond
	return resp, err
}

func (h *hasty) Poll(ctx context.Context, req frontend.PollRequest) ([]frontend.Task, error) {
	tasks, err := h.Frontend.Poll(ctx, req)
	for i := range tasks {
		tasks[i].Lease = time.Nanosecond
	}
	return tasks, err
}

func (h *hasty) Heartbeat(ctx context.Context, req frontend.HeartbeatRequest) (frontend.HeartbeatResponse, error) {
	h.heartbeats.Add(1)
	return h.Frontend.Heartbeat(ctx, req)
}

// A worker reads intervals below the protocol's floors as the floors: an engine answering a
// nanosecond does not make its manifest and heartbeat loops spin against it (a lease of the
// floor renews every third of 100 ms, a manifest goes again after a second), and the run still
// completes under its lease.
func TestAnEnginesIntervalsBelowTheFloorsAreReadAsTheFloors(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
	j := jobs.MustDefine("hasty", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, in string) (string, error) {
			time.Sleep(400 * time.Millisecond) // renewals and resends happen while it runs
			return in, nil
		})
	fe := &hasty{Frontend: env.Engine}
	res, err := j.Enqueue(context.Background(), env.Engine, "x")
	if err != nil {
		t.Fatal(err)
	}
	env.Worker(worker.Config{Frontend: fe, Queues: map[string]int{jobs.DefaultQueue: 1}}, j)
	env.Await(res.RunID, store.StateCompleted)
	// At the floors: a manifest or two, a dozen or so renewals in 400 ms. At a nanosecond each
	// loop sends as fast as the engine answers: thousands.
	if m := fe.manifests.Load(); m > 5 {
		t.Errorf("%d manifests while one run of 400 ms ran: the resend loop ran at the engine's nanosecond", m)
	}
	if h := fe.heartbeats.Load(); h == 0 || h > 60 {
		t.Errorf("%d heartbeats while one run of 400 ms ran: want a renewal every third of %s", h, frontend.MinLease)
	}
}
