package outbox

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

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

// startBlocked starts a relay whose publisher holds its first publish, over one staged row, and
// returns once that publish is in flight.
func startBlocked(t *testing.T) (*Relay, *blocking, *MemoryStore, *testenv.Env) {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Store: testenv.Backends()[0].Open(t), Clock: clock.Real{}})
	mem := NewMemoryStore()
	b := backend{outbox: mem, begin: func(*testing.T) (Tx, func() error, func() error) {
		tx := mem.Begin()
		return tx, tx.Commit, tx.Rollback
	}}
	stage(t, b, newOutbox(t, b, env, Required), "in-flight")
	pub := &blocking{next: env.Engine, entered: make(chan struct{}, 1), release: make(chan struct{})}
	r, err := NewRelay(RelayConfig{Store: mem, Publisher: pub, Interval: 5 * time.Millisecond, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-pub.entered
	return r, pub, mem, env
}

// stopTimesOut calls Stop with a ctx that ends while the pass is still in flight.
func stopTimesOut(t *testing.T, r *Relay) {
	t.Helper()
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := r.Stop(short); err == nil {
		t.Fatal("Stop returned nil with the publish still in flight")
	}
}

// stillWaiting fails the test if what (a Stop or Start) returns on done within d, while pub holds
// the pass in flight; it releases the pass before failing so that nothing is left blocked.
func stillWaiting(t *testing.T, done <-chan error, d time.Duration, pub *blocking, what string) {
	t.Helper()
	select {
	case err := <-done:
		close(pub.release)
		t.Fatalf("%s returned (%v) with the pass still in flight", what, err)
	case <-time.After(d):
	}
}

// A Stop whose ctx ran out leaves the pass in flight; a second Stop (the caller waiting longer)
// joins it again, rather than returning at once and letting the caller close the database under
// the row about to be marked.
func TestStopAfterATimedOutStopStillJoinsThePass(t *testing.T) {
	t.Parallel()
	r, pub, mem, env := startBlocked(t)
	stopTimesOut(t, r)
	stopped := make(chan error, 1)
	go func() { stopped <- r.Stop(context.Background()) }()
	stillWaiting(t, stopped, 100*time.Millisecond, pub, "the second Stop")
	close(pub.release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if n := backlogOf(t, mem); n != 0 {
		t.Errorf("after Stop the row is still in line (backlog %d): Stop returned before the pass's mark", n)
	}
	if len(runsOf(t, env)) != 1 {
		t.Error("the row's run was not created")
	}
}

// A Start after a Stop whose ctx ran out waits for the old loop to exit: a second loop under the
// same relay id would claim and publish alongside the pass still in flight.
func TestStartAfterATimedOutStopWaitsForTheOldLoop(t *testing.T) {
	t.Parallel()
	r, pub, _, _ := startBlocked(t)
	stopTimesOut(t, r)
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := r.Start(short); err == nil {
		close(pub.release)
		t.Fatal("Start returned nil with the old loop still in its pass: two loops run under one relay id")
	}
	started := make(chan error, 1)
	go func() { started <- r.Start(context.Background()) }()
	stillWaiting(t, started, 50*time.Millisecond, pub, "Start")
	close(pub.release)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	// The new loop runs, and stops as any.
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// zeroMarkStore's MarkPublished retires none of the rows: the claim lapsed and another relay
// took them over.
type zeroMarkStore struct{ Store }

func (zeroMarkStore) MarkPublished(context.Context, string, []string, time.Time) (int, error) {
	return 0, nil
}

// jobs_outbox_published_total counts the rows a relay published AND marked: a late mark that
// retired nothing (the relay that took the rows over counts them) adds nothing.
func TestPublishedTotalCountsOnlyMarkedRows(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: testenv.Backends()[0].Open(t)})
	mem := NewMemoryStore()
	b := backend{outbox: mem, begin: func(*testing.T) (Tx, func() error, func() error) {
		tx := mem.Begin()
		return tx, tx.Commit, tx.Rollback
	}}
	ob := newOutbox(t, b, env, Required)
	stage(t, b, ob, "lapsed")
	r, err := NewRelay(RelayConfig{Store: zeroMarkStore{mem}, Publisher: env.Engine, Clock: env.Clock, Logger: env.Logger,
		Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if n := pass(t, r); n != 1 {
		t.Fatalf("published %d rows, want 1", n)
	}
	if got := testutil.ToFloat64(r.metrics.published); got != 0 {
		t.Errorf("jobs_outbox_published_total = %v after a mark that retired no row, want 0", got)
	}
	// The relay that holds the rows now marks them, and counts them.
	r2, err := NewRelay(RelayConfig{Store: mem, Publisher: env.Engine, Clock: env.Clock, Logger: env.Logger,
		Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	env.Fake().Advance(DefaultLease + time.Second)
	if n := pass(t, r2); n != 1 {
		t.Fatalf("the relay that took the row over published %d rows, want 1", n)
	}
	if got := testutil.ToFloat64(r2.metrics.published); got != 1 {
		t.Errorf("jobs_outbox_published_total of the relay that marked the row = %v, want 1", got)
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
