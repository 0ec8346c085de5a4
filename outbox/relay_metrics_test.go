package outbox

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// gathered returns the value of family name's one series, and whether it was served.
func gathered(t *testing.T, g prometheus.Gatherer, name string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		if len(mf.GetMetric()) != 1 {
			t.Fatalf("%s has %d series, want 1", name, len(mf.GetMetric()))
		}
		m := mf.GetMetric()[0]
		if m.Gauge != nil {
			return m.GetGauge().GetValue(), true
		}
		return m.GetCounter().GetValue(), true
	}
	return 0, false
}

// memOutbox is a memory outbox store with an Outbox staging into it.
func memOutbox(t *testing.T, env *testenv.Env) (*MemoryStore, backend, *Outbox) {
	mem := NewMemoryStore()
	b := backend{outbox: mem, begin: func(*testing.T) (Tx, func() error, func() error) {
		tx := mem.Begin()
		return tx, tx.Commit, tx.Rollback
	}}
	return mem, b, newOutbox(t, b, env, Required)
}

// Relays in one process share its registry: two outbox tables, or a relay built again after a
// Stop. The second NewRelay used to fail X_INVARIANT on the duplicate registration. Now the
// counters are the process's, and the gauges are served once for the running relays: the
// backlog and the failed rows summed over their distinct stores (two relays on one store count
// it once), the oldest row's age the largest.
func TestRelaysShareOneRegistry(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	reg := prometheus.NewRegistry()
	// The first row of each table fails to publish, holding its table's backlog in place.
	pub := &recorder{next: env.Engine, fail: map[string]int{"note:a1": 100, "note:b1": 100}}
	relay := func(st Store, id string) *Relay {
		t.Helper()
		r, err := NewRelay(RelayConfig{Store: st, Publisher: pub, ID: id, Clock: env.Clock, Logger: env.Logger, Registerer: reg})
		if err != nil {
			t.Fatalf("relay %s on a shared registry: %v", id, err)
		}
		return r
	}
	memA, bA, obA := memOutbox(t, env)
	stage(t, bA, obA, "a1", "a2", "a3")
	env.Fake().Advance(60 * time.Second)
	memB, bB, obB := memOutbox(t, env)
	stage(t, bB, obB, "b1", "b2")
	memC, bC, obC := memOutbox(t, env)
	stage(t, bC, obC, "c1")
	env.Fake().Advance(30 * time.Second)

	ra, ra2, rb, rc := relay(memA, "a"), relay(memA, "a-again"), relay(memB, "b"), relay(memC, "c")
	if _, ok := gathered(t, reg, "jobs_outbox_backlog"); ok {
		t.Error("jobs_outbox_backlog served before any relay read its store")
	}
	for _, r := range []*Relay{ra, ra2, rb} {
		if _, err := r.Pass(t.Context()); err == nil {
			t.Fatalf("relay %s: the injected failure did not fail the pass", r.ID())
		}
	}
	if n := pass(t, rc); n != 1 {
		t.Fatalf("relay c published %d rows, want 1", n)
	}
	if got, _ := gathered(t, reg, "jobs_outbox_backlog"); got != 5 {
		t.Errorf("jobs_outbox_backlog = %v for 3 rows in one table (two relays on it) and 2 in another, want 5", got)
	}
	if got, _ := gathered(t, reg, "jobs_outbox_oldest_staged_seconds"); got < 89 || got > 91 {
		t.Errorf("jobs_outbox_oldest_staged_seconds = %v, want the oldest of the tables' rows, 90s", got)
	}
	if got, _ := gathered(t, reg, "jobs_outbox_failed"); got != 0 {
		t.Errorf("jobs_outbox_failed = %v, want 0", got)
	}
	if got, _ := gathered(t, reg, "jobs_outbox_published_total"); got != 1 {
		t.Errorf("jobs_outbox_published_total = %v after relay c published its row, want 1", got)
	}
	if rows, _ := rb.Backlog(); rows != 2 {
		t.Errorf("relay b's own backlog %v, want 2", rows)
	}
	// A relay that stops is no longer served; the others are.
	if err := rb.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, _ := gathered(t, reg, "jobs_outbox_backlog"); got != 3 {
		t.Errorf("jobs_outbox_backlog = %v once table b's relay stopped, want 3", got)
	}
	for _, r := range []*Relay{ra, ra2, rc} {
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if got, ok := gathered(t, reg, "jobs_outbox_backlog"); ok {
		t.Errorf("jobs_outbox_backlog = %v with every relay stopped, want it not served", got)
	}
	if got, _ := gathered(t, reg, "jobs_outbox_published_total"); got != 1 {
		t.Errorf("jobs_outbox_published_total = %v once the relays stopped, want 1 (a counter stays)", got)
	}
}

// A relay that stops no longer serves its last reading of the backlog as if current: its gauges
// used to keep their last values, a backlog nobody was publishing any more.
func TestAStoppedRelaysGaugesAreNotServed(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	reg := prometheus.NewRegistry()
	mem, b, ob := memOutbox(t, env)
	stage(t, b, ob, "s1", "s2")
	pub := &recorder{next: env.Engine, fail: map[string]int{"note:s1": 1 << 20}}
	r, err := NewRelay(RelayConfig{Store: mem, Publisher: pub, Clock: env.Clock, Logger: env.Logger, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		if got, ok := gathered(t, reg, "jobs_outbox_backlog"); ok && got == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the running relay's backlog was not served")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"jobs_outbox_backlog", "jobs_outbox_oldest_staged_seconds", "jobs_outbox_failed"} {
		if got, ok := gathered(t, reg, name); ok {
			t.Errorf("%s = %v after the relay stopped, want it not served", name, got)
		}
	}
	if rows, _ := r.Backlog(); rows != 2 {
		t.Errorf("Backlog() = %v after the stop, want its last reading, 2", rows)
	}
}

// A registry that refuses one of the relay's series (it holds another jobs_outbox_failed) refuses
// NewRelay with X_INVARIANT and is left as it was: the relay's other series, registered before
// the refusal, used to stay behind, bound to a relay that was never returned.
func TestARefusedRelayRegistrationLeavesTheRegistryAsItWas(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	for _, name := range []string{"jobs_outbox_failed", "jobs_outbox_failed_total"} {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "the application's own"}))
			_, err := NewRelay(RelayConfig{Store: NewMemoryStore(), Publisher: env.Engine, Clock: env.Clock, Logger: env.Logger,
				Registerer: reg})
			if !jobs.HasCode(err, jobs.CodeInvariant) {
				t.Fatalf("NewRelay on a registry holding another %s: %v, want %s", name, err, jobs.CodeInvariant)
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() != name {
					t.Errorf("the refused NewRelay left %s registered", mf.GetName())
				}
			}
			// The registry is as it was: a relay on a registry of its own registers everything.
			if _, err := NewRelay(RelayConfig{Store: NewMemoryStore(), Publisher: env.Engine, Clock: env.Clock,
				Logger: env.Logger, Registerer: prometheus.NewRegistry()}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
