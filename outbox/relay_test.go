package outbox

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/internal/testenv"
)

// blocking is a Publisher that holds each publish until released.
type blocking struct {
	next    jobs.Enqueuer
	entered chan struct{}
	release chan struct{}
}

func (b *blocking) Enqueue(ctx context.Context, req jobs.EnqueueRequest) (jobs.EnqueueResult, error) {
	b.entered <- struct{}{}
	<-b.release
	return b.next.Enqueue(ctx, req)
}

// Stop joins the pass in flight: it returns only once the row being published is marked.
func TestStopJoinsThePassInFlight(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: testenv.Backends()[0].Open(t), Clock: clock.Real{}})
	mem := NewMemoryStore()
	b := backend{outbox: mem, begin: func(*testing.T) (Tx, func() error, func() error) {
		tx := mem.Begin()
		return tx, tx.Commit, tx.Rollback
	}}
	ob := newOutbox(t, b, env, Required)
	stage(t, b, ob, "in-flight")
	pub := &blocking{next: env.Engine, entered: make(chan struct{}, 1), release: make(chan struct{})}
	r, err := NewRelay(RelayConfig{Store: mem, Publisher: pub, Interval: 5 * time.Millisecond, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-pub.entered
	stopped := make(chan error, 1)
	go func() { stopped <- r.Stop(context.Background()) }()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) with a publish in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(pub.release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if n, _, _ := mem.Backlog(t.Context()); n != 0 {
		t.Errorf("after Stop the row is still staged (backlog %d): the pass was cut before its mark", n)
	}
	if len(runsOf(t, env)) != 1 {
		t.Error("the row's run was not created")
	}
}

// failingStore fails its first claims, as a database that is briefly away.
type failingStore struct {
	Store
	fails atomic.Int32
}

func (f *failingStore) Claim(ctx context.Context, relay string, now time.Time, lease time.Duration, limit int) ([]Row, error) {
	if f.fails.Add(-1) >= 0 {
		return nil, jobs.Errorf(jobs.CodeStoreUnavailable, "injected claim failure")
	}
	return f.Store.Claim(ctx, relay, now, lease, limit)
}

// A pass that fails is logged as jobs.outbox.tick-failed and the loop re-arms.
func TestTickFailedIsLoggedAndReArmed(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: testenv.Backends()[0].Open(t), Clock: clock.Real{}})
	mem := NewMemoryStore()
	b := backend{outbox: mem, begin: func(*testing.T) (Tx, func() error, func() error) {
		tx := mem.Begin()
		return tx, tx.Commit, tx.Rollback
	}}
	stage(t, b, newOutbox(t, b, env, Required), "after-failures")
	fs := &failingStore{Store: mem}
	fs.fails.Store(3)
	var logs testenv.LogBuffer
	r, err := NewRelay(RelayConfig{Store: fs, Publisher: env.Engine, Interval: 2 * time.Millisecond, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for len(runsOf(t, env)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the relay never published after its failed passes")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "jobs.outbox.tick-failed"); n != 3 {
		t.Errorf("logged jobs.outbox.tick-failed %d times, want 3:\n%s", n, logs.String())
	}
}

// The backlog metrics: rows waiting and the oldest one's age.
func TestBacklogMetrics(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, env *testenv.Env) {
		ob := newOutbox(t, b, env, Required)
		stage(t, b, ob, "m1", "m2")
		env.Fake().Advance(90 * time.Second)
		rec := &recorder{next: env.Engine, fail: map[string]int{"note:m1": 1}}
		r := newRelay(t, b, env, rec, "metrics", 10)
		if _, err := r.Pass(t.Context()); err == nil {
			t.Fatal("the injected failure did not fail the pass")
		}
		rows, age := r.Backlog()
		if rows != 2 || age < 89 || age > 91 {
			t.Errorf("backlog %v rows, oldest %vs; want 2 rows, 90s", rows, age)
		}
		pass(t, r)
		if rows, age := r.Backlog(); rows != 0 || age != 0 {
			t.Errorf("after publishing: %v rows, %vs; want 0, 0", rows, age)
		}
	})
}
