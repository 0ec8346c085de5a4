package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// slowRefusedBeat holds one heartbeat (once armed) until released, then refuses every lease in
// it: an engine that was slow to answer and had taken the claim back meanwhile.
type slowRefusedBeat struct {
	frontend.Frontend
	armed   atomic.Bool
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (f *slowRefusedBeat) Heartbeat(ctx context.Context, req frontend.HeartbeatRequest) (frontend.HeartbeatResponse, error) {
	held := false
	if f.armed.Load() {
		f.once.Do(func() { held = true })
	}
	if !held {
		return f.Frontend.Heartbeat(ctx, req)
	}
	close(f.entered)
	<-f.release
	codes := make([]string, len(req.Leases))
	for i := range codes {
		codes[i] = string(jobs.CodeJobLeaseLost)
	}
	return frontend.HeartbeatResponse{Codes: codes}, nil
}

// One lost claim is one lost lease. A renewal on the wire when the loss check declares the claim
// lost (no renewal landed for a whole lease) may then be refused; the refusal used to declare the
// same claim lost again, counting 2 in job_leases_lost_total{source="worker"} and logging
// jobs.lease.lost twice, when the body did not return at once on its context's cancellation.
func TestALeaseLostWhileItsRenewalIsOnTheWireIsCountedOnce(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	fe := &slowRefusedBeat{Frontend: env.Engine, entered: make(chan struct{}), release: make(chan struct{})}
	hold := make(chan struct{})
	started := make(chan struct{}, 1)
	j := jobs.MustDefine("stuck", func(int) string { return "k" }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, _ int) (int, error) {
			return jobs.Step(c, "slow", func(context.Context) (int, error) {
				started <- struct{}{}
				<-hold // a call that does not take ctx
				return 1, nil
			})
		})
	var logs testenv.LogBuffer
	wclock := clock.NewFake(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)) // the worker's own clock
	w := env.Worker(worker.Config{Frontend: fe, Clock: wclock, HeartbeatInterval: 20 * time.Millisecond, Logger: logs.Logger()}, j)
	defer close(hold)
	if _, err := j.Enqueue(t.Context(), env.Engine, 1); err != nil {
		t.Fatal(err)
	}
	<-started
	fe.armed.Store(true)
	select {
	case <-fe.entered: // a renewal is on the wire, and will be slow
	case <-time.After(10 * time.Second):
		t.Fatal("no heartbeat")
	}
	wclock.Advance(31 * time.Second) // no renewal landed for a whole lease (30s)
	for deadline := time.Now().Add(10 * time.Second); w.LeasesLost("default") < 1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := w.LeasesLost("default"); n != 1 {
		t.Fatalf("leases lost %v once the window passed, want 1", n)
	}
	close(fe.release) // the slow renewal answers: refused
	for deadline := time.Now().Add(time.Second); !strings.Contains(logs.String(), "jobs.heartbeat.failed") &&
		time.Now().Before(deadline) && w.LeasesLost("default") == 1; {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the refusal's answer loop has run
	if n := w.LeasesLost("default"); n != 1 {
		t.Errorf(`job_leases_lost_total{source="worker",queue="default"} = %v for one claim lost once, want 1`, n)
	}
	if n := strings.Count(logs.String(), "jobs.lease.lost"); n != 1 {
		t.Errorf("%d jobs.lease.lost lines for one claim lost, want 1", n)
	}
}

// A run cancelled while its body ran, the heartbeat not having told the worker yet, has its
// completion refused X_ABORTED. The worker counted it completed; it counts it cancelled.
func TestACancelledRunsRefusedCompletionIsCountedCancelled(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	hold := make(chan struct{})
	started := make(chan struct{}, 1)
	j := jobs.MustDefine("cancelled", func(int) string { return "k" }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, _ int) (int, error) {
			started <- struct{}{}
			<-hold
			return 1, nil
		})
	reg := prometheus.NewRegistry()
	env.Worker(worker.Config{Registerer: reg}, j)
	res, err := j.Enqueue(t.Context(), env.Engine, 1)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if _, err := env.Engine.Cancel(t.Context(), res.RunID, "test"); err != nil {
		t.Fatal(err)
	}
	close(hold) // the body returns before any heartbeat told the worker of the cancel
	count := func(outcome string) float64 {
		return testenv.Counter(t, reg, jobs.MetricJobsTotal, map[string]string{"source": "worker", "outcome": outcome})
	}
	for deadline := time.Now().Add(5 * time.Second); count("cancelled")+count("completed") == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if run, _ := env.Engine.GetRun(t.Context(), res.RunID); run.State != store.StateCancelled {
		t.Fatalf("run is %s, want cancelled", run.State)
	}
	if c, k := count("completed"), count("cancelled"); c != 0 || k != 1 {
		t.Errorf(`jobs_total{source="worker"}: completed %v, cancelled %v for a run cancelled under its body (completion refused X_ABORTED); want 0, 1`, c, k)
	}
}

// refusedFinal refuses a claim's final record with code, after waiting for block when set.
type refusedFinal struct {
	frontend.Frontend
	code  jobs.Code
	block chan struct{}
	tries atomic.Int32
}

func (f *refusedFinal) Record(ctx context.Context, req frontend.RecordRequest) (frontend.RecordResponse, error) {
	switch req.Commands[len(req.Commands)-1].Kind {
	case frontend.CmdComplete, frontend.CmdFail, frontend.CmdBlock:
		f.tries.Add(1)
		if f.block != nil {
			<-f.block
		}
		return frontend.RecordResponse{}, jobs.Errorf(f.code, "refused by the test")
	}
	return f.Frontend.Record(ctx, req)
}

// A final record the engine refused is not counted under its outcome: the run did not end so.
// X_ABORTED (the run was cancelled) is counted cancelled, X_JOB_LEASE_LOST (the claim is another
// worker's, where the run may complete) a lost lease; before, a refused completion counted
// completed, and a refused failure failed or retried, whatever the refusal.
func TestARefusedFinalRecordIsCountedAsItsRefusalSays(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		fails     bool
		refusal   jobs.Code
		cancelled float64
		lost      float64
	}{
		{"completion-refused-aborted", false, jobs.CodeAborted, 1, 0},
		{"completion-refused-lease-lost", false, jobs.CodeJobLeaseLost, 0, 1},
		{"retry-refused-aborted", true, jobs.CodeAborted, 1, 0},
		{"retry-refused-lease-lost", true, jobs.CodeJobLeaseLost, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t, testenv.Options{Store: memory.New()})
			fe := &refusedFinal{Frontend: env.Engine, code: c.refusal}
			j := jobs.MustDefine("refused", func(int) string { return "k" }, jobs.NoTenant[int](),
				func(*jobs.Ctx, int) (int, error) {
					if c.fails {
						return 0, errors.New("boom")
					}
					return 1, nil
				})
			reg := prometheus.NewRegistry()
			w := env.Worker(worker.Config{Frontend: fe, Registerer: reg}, j)
			if _, err := j.Enqueue(t.Context(), env.Engine, 1); err != nil {
				t.Fatal(err)
			}
			count := func(outcome string) float64 {
				return testenv.Counter(t, reg, jobs.MetricJobsTotal, map[string]string{"source": "worker", "outcome": outcome})
			}
			ended := func() float64 {
				return count("completed") + count("retried") + count("failed") + count("cancelled") + w.LeasesLost("default")
			}
			for deadline := time.Now().Add(5 * time.Second); ended() == 0 && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond) // nothing else is counted after
			if fe.tries.Load() != 1 {
				t.Fatalf("the final record was sent %d times, want 1", fe.tries.Load())
			}
			if done, retried := count("completed"), count("retried"); done != 0 || retried != 0 {
				t.Errorf(`jobs_total{source="worker"}: completed %v, retried %v for a final record refused %s; want 0, 0`, done, retried, c.refusal)
			}
			if got := count("cancelled"); got != c.cancelled {
				t.Errorf(`jobs_total{source="worker",outcome="cancelled"} = %v, want %v`, got, c.cancelled)
			}
			if got := w.LeasesLost("default"); got != c.lost {
				t.Errorf(`job_leases_lost_total{source="worker"} = %v, want %v`, got, c.lost)
			}
		})
	}
}

// A final record the worker gave up on (the engine unreachable until the worker stopped) is the
// worker's own X_ABORTED, not a refusal of the engine's: it is not counted cancelled.
func TestAFinalRecordGivenUpAtStopIsNotCountedCancelled(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	fe := &refusedFinal{Frontend: env.Engine, code: jobs.CodeEngineUnreachable, block: make(chan struct{})}
	j := jobs.MustDefine("given-up", func(int) string { return "k" }, jobs.NoTenant[int](),
		func(*jobs.Ctx, int) (int, error) { return 1, nil })
	reg := prometheus.NewRegistry()
	var logs testenv.LogBuffer
	w := env.Worker(worker.Config{Frontend: fe, Registerer: reg, Logger: logs.Logger()}, j)
	if _, err := j.Enqueue(t.Context(), env.Engine, 1); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); fe.tries.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_ = w.Stop(ctx) // runs out waiting for the claim, and stops the worker under it
	close(fe.block) // the engine still unreachable: the worker gives the record up
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "jobs.record.failed") && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "jobs.record.abandoned") {
		t.Fatalf("the final record was not given up:\n%s", logs.String())
	}
	time.Sleep(20 * time.Millisecond)
	for _, outcome := range []string{"completed", "cancelled"} {
		if n := testenv.Counter(t, reg, jobs.MetricJobsTotal, map[string]string{"source": "worker", "outcome": outcome}); n != 0 {
			t.Errorf(`jobs_total{source="worker",outcome=%q} = %v for a record the worker gave up on, want 0`, outcome, n)
		}
	}
}
