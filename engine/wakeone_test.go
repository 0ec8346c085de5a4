package engine_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/store/postgres"
	"github.com/ultimat3/jobs/worker"
)

// countClaims counts the polls that claimed: a claim's shares each, since the polls of several
// workers may share one claim (matching/gather.go).
type countClaims struct {
	store.Store
	n atomic.Int64
}

func (c *countClaims) RunClaim(ctx context.Context, p store.ClaimParams) ([]store.Run, error) {
	c.n.Add(int64(len(p.Claimers())))
	return c.Store.RunClaim(ctx, p)
}

// With eight workers idle on a queue, a new run sends one of them to the store, not all eight:
// each run costs the claim that takes it and the next empty claim of the worker that ran it.
// The fallback is a minute, so a wake that reached no poll would show as a run never started.
func TestANewRunSendsOneIdleWorkerToTheStore(t *testing.T) {
	st := &countClaims{Store: memory.New()}
	eng := startEngine(t, st)
	idleWorkersClaimNewRuns(t, eng, eng, st)
}

// The same across engines on one Postgres: the run is created by an engine with no workers, and
// the engine whose workers wait hears of it by notification, which marks a new run as such.
func TestANotifiedNewRunSendsOneIdleWorkerToTheStore(t *testing.T) {
	if os.Getenv("TEST_DATABASE_URL") == "" {
		t.Skip("TEST_DATABASE_URL is not set")
	}
	a, url, schema := testenv.OpenPostgresIn(t, 4)
	b, err := postgres.Open(context.Background(), postgres.Config{URL: url, Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	st := &countClaims{Store: b}
	idleWorkersClaimNewRuns(t, startEngine(t, a), startEngine(t, notified{st, b}), st)
}

// notified is a counted store that passes its store's notifications on.
type notified struct {
	*countClaims
	n store.Notifier
}

func (s notified) Subscribe(ctx context.Context) (<-chan store.Signal, error) {
	return s.n.Subscribe(ctx)
}

func startEngine(t *testing.T, st store.Store) *engine.Engine {
	t.Helper()
	eng, err := engine.New(engine.Config{Store: st, PollFallback: time.Minute, AllowUndeclared: true, Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Stop(context.Background()) })
	return eng
}

// idleWorkersClaimNewRuns starts eight workers on serve, enqueues twenty runs one at a time on
// enqueue, and fails if the workers' claims (counted by st) were more than three a run.
func idleWorkersClaimNewRuns(t *testing.T, enqueue, serve *engine.Engine, st *countClaims) {
	started := make(chan int, 1)
	def := jobs.MustDefine("wake.one", func(i int) string { return fmt.Sprint(i) }, jobs.NoTenant[int](),
		func(_ *jobs.Ctx, i int) (int, error) { started <- i; return i, nil })
	reg, err := jobs.NewRegistry(def)
	if err != nil {
		t.Fatal(err)
	}
	const workers = 8
	for i := range workers {
		w, err := worker.New(worker.Config{Frontend: serve, Registry: reg, ID: fmt.Sprint("w", i), Concurrency: 2,
			PollWait: time.Minute, Logger: testenv.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Stop(context.Background()) })
	}
	settle := func() { // until no claim is made for 50ms: every worker's poll is waiting
		for n := st.n.Load(); ; {
			time.Sleep(50 * time.Millisecond)
			m := st.n.Load()
			if m == n && m >= workers {
				return
			}
			n = m
		}
	}
	settle()
	const runs = 20
	before := st.n.Load()
	for i := range runs {
		if _, err := def.Enqueue(t.Context(), enqueue, i); err != nil {
			t.Fatal(err)
		}
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d did not start within 10s", i)
		}
		settle()
	}
	claims := st.n.Load() - before
	t.Logf("%d claims for %d runs with %d workers waiting", claims, runs, workers)
	if claims > 3*runs {
		t.Fatalf("%d claims for %d runs: new runs woke more than one waiting worker each", claims, runs)
	}
}
