package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// leader returns jobs_scheduler_leader as reg serves it: one series, or none.
func leader(t *testing.T, reg prometheus.Gatherer) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "jobs_scheduler_leader" {
			if len(mf.GetMetric()) != 1 {
				t.Fatalf("jobs_scheduler_leader has %d series, want 1", len(mf.GetMetric()))
			}
			return mf.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// Two schedulers of one engine on one registry (two in a process, or one built again): the
// second used to fail X_INVARIANT on the duplicate registration. They share one collector:
// jobs_scheduler_leader reads 1 whichever of them leads (the process is the node), and 0 when
// neither does; each schedule's series is served once.
func TestTwoSchedulersOfOneEngineShareOneRegistry(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	reg := prometheus.NewRegistry()
	sched := func(id string) *scheduler.Scheduler {
		t.Helper()
		s, err := scheduler.New(scheduler.Config{Engine: env.Engine, ID: id, Registerer: reg, Logger: env.Logger,
			Schedules: scheduler.Static(define(t, "hourly", "0 * * * *", "UTC"))})
		if err != nil {
			t.Fatalf("scheduler %s on a shared registry: %v", id, err)
		}
		return s
	}
	a, b := sched("a"), sched("b")
	if v, _ := leader(t, reg); v != 0 {
		t.Fatalf("jobs_scheduler_leader = %v before any round, want 0", v)
	}
	tick(t, a)
	tick(t, b) // a holds the lease
	if v, _ := leader(t, reg); v != 1 {
		t.Errorf("jobs_scheduler_leader = %v with a leading, want 1", v)
	}
	if err := a.Stop(t.Context()); err != nil { // hands the lease back
		t.Fatal(err)
	}
	if v, _ := leader(t, reg); v != 0 {
		t.Errorf("jobs_scheduler_leader = %v with neither leading, want 0", v)
	}
	tick(t, b)
	if !b.Leading() {
		t.Fatal("b did not take the released lease")
	}
	if v, _ := leader(t, reg); v != 1 {
		t.Errorf("jobs_scheduler_leader = %v with b leading, want 1 (the first scheduler's collector read a's lead)", v)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "jobs_schedule_last_fire_timestamp_seconds" && len(mf.GetMetric()) != 1 {
			t.Errorf("%s has %d series for one schedule, want 1", mf.GetName(), len(mf.GetMetric()))
		}
	}
	_ = b.Stop(t.Context())
}

// A registry serving another engine's schedulers, or another series under one of the names,
// refuses the scheduler with X_INVARIANT and is left as it was.
func TestASchedulerRefusedItsMetricsLeavesTheRegistryAsItWas(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	other := testenv.Start(t, testenv.Options{Store: memory.New()})
	for _, c := range []struct {
		name string
		prep func(reg *prometheus.Registry)
	}{
		{"another-engines-scheduler", func(reg *prometheus.Registry) {
			if _, err := scheduler.New(scheduler.Config{Engine: other.Engine, ID: "other", Registerer: reg, Logger: env.Logger}); err != nil {
				t.Fatal(err)
			}
		}},
		{"another-series-of-the-leader-gauge", func(reg *prometheus.Registry) {
			reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "jobs_scheduler_leader", Help: "the application's own"}))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			c.prep(reg)
			before, _ := leader(t, reg)
			_, err := scheduler.New(scheduler.Config{Engine: env.Engine, ID: "mine", Registerer: reg, Logger: env.Logger})
			if !jobs.HasCode(err, jobs.CodeInvariant) {
				t.Fatalf("scheduler.New: %v, want %s", err, jobs.CodeInvariant)
			}
			if after, _ := leader(t, reg); after != before {
				t.Errorf("jobs_scheduler_leader %v after the refusal, was %v", after, before)
			}
		})
	}
}

// heldLeader holds LeaderAcquire (once armed) until released.
type heldLeader struct {
	store.Store
	mu      sync.Mutex
	entered chan struct{}
	release chan struct{}
}

func (h *heldLeader) arm() (entered, release chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.entered, h.release = make(chan struct{}), make(chan struct{})
	return h.entered, h.release
}

func (h *heldLeader) LeaderAcquire(ctx context.Context, p store.LeaderParams) (store.Leader, error) {
	h.mu.Lock()
	entered, release := h.entered, h.release
	h.entered = nil
	h.mu.Unlock()
	if entered != nil {
		close(entered)
		<-release
	}
	return h.Store.LeaderAcquire(ctx, p)
}

// A Stop that runs out of time while a round is in flight leaves the round to finish; the lease
// is then released and the node no longer reads as leading. It used to read 1 in
// jobs_scheduler_leader for good, with no loop left to lead, and kept the lease until it lapsed.
func TestAStopThatRanOutOfTimeStillReleasesTheLead(t *testing.T) {
	t.Parallel()
	h := &heldLeader{Store: memory.New()}
	env := testenv.Start(t, testenv.Options{Store: h})
	reg := prometheus.NewRegistry()
	var logs testenv.LogBuffer
	s, err := scheduler.New(scheduler.Config{Engine: env.Engine, ID: "a", Registerer: reg, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !s.Leading(); {
		if time.Now().After(deadline) {
			t.Fatal("the scheduler did not lead")
		}
		time.Sleep(time.Millisecond)
	}
	entered, release := h.arm()
	env.Fake().Advance(time.Second) // the next round, held in its lease renewal
	<-entered
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := s.Stop(ctx); err == nil {
		t.Fatal("Stop returned nil with a round held in flight")
	}
	close(release) // the round ends, having renewed the lease
	for deadline := time.Now().Add(5 * time.Second); ; {
		if v, _ := leader(t, reg); v == 0 && !s.Leading() {
			break
		}
		if time.Now().After(deadline) {
			v, _ := leader(t, reg)
			t.Fatalf("jobs_scheduler_leader = %v, Leading %v after the stopped loop's last round ended; want 0, false", v, s.Leading())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The lease was handed back: another node leads at its next round.
	b := start(t, env, "b")
	tick(t, b)
	if !b.Leading() {
		t.Error("another node could not lead: the stopped node kept the lease")
	}
}
