package api_test

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// engineProc is an engine and its HTTP API on a fixed address, which a test kills and starts
// again like an operator's deploy: the listener and every open connection cut at once.
type engineProc struct {
	eng *engine.Engine
	srv *api.Server
	hs  *http.Server
	ln  net.Listener
}

func startEngine(t *testing.T, st store.Store, addr string, lease time.Duration) *engineProc {
	t.Helper()
	log := testenv.Logger()
	eng, err := engine.New(engine.Config{Store: st, Lease: lease, PollFallback: 50 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv, err := api.NewServer(api.Config{Engine: eng, Logger: log, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	for deadline := time.Now().Add(5 * time.Second); ; {
		// The port was ours a moment ago; a listener closed by kill may take a moment to free.
		if ln, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	p := &engineProc{eng: eng, srv: srv, hs: &http.Server{Handler: srv}, ln: ln}
	go func() { _ = p.hs.Serve(ln) }()
	t.Cleanup(p.kill)
	return p
}

// kill cuts every connection at once (no drain, no answers to requests in flight) and stops
// the engine.
func (p *engineProc) kill() {
	_ = p.hs.Close()
	p.srv.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.eng.Stop(ctx)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// gatedJob's first step waits for the test to open its gate, so the test can take the engine
// away while the step is in flight; the second step is plain.
type gatedJob struct {
	job     *jobs.Job[int, int]
	entered chan struct{}
	gate    chan struct{}
	runsA   atomic.Int32
	once    sync.Once
}

func newGatedJob() *gatedJob {
	g := &gatedJob{entered: make(chan struct{}), gate: make(chan struct{})}
	g.job = jobs.MustDefine("gated", func(in int) string { return "k" }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			a, err := jobs.Step(ctx, "a", func(context.Context) (int, error) {
				g.runsA.Add(1)
				g.once.Do(func() { close(g.entered) })
				<-g.gate
				return in, nil
			})
			if err != nil {
				return 0, err
			}
			return jobs.Step(ctx, "b", func(context.Context) (int, error) { return a + 1, nil })
		},
		// One attempt: an outage that spent one would dead-letter the run.
		jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
	return g
}

func remoteWorkerAt(t *testing.T, url string, defs ...jobs.Definition) *worker.Worker {
	t.Helper()
	c, err := api.NewClient(url, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	reg, err := jobs.NewRegistry(defs...)
	if err != nil {
		t.Fatal(err)
	}
	w := startWorker(t, worker.Config{Frontend: c, Registry: reg, Logger: testenv.Logger(), PollWait: time.Second})
	return w
}

func awaitState(t *testing.T, eng *engine.Engine, id string, want store.State, within time.Duration) store.Run {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r, err := eng.GetRun(context.Background(), id)
		if err == nil && r.State == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: %s (%v) after %s, want %s (%s %s)", id, r.State, err, within, want, r.ErrorCode, r.Error)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An engine restarted while a remote worker is in the middle of a step costs the run nothing:
// the worker holds the step's result and resends it until the engine is back, and the run
// completes on its first (and only) attempt with the step recorded once.
func TestEngineRestartMidStepCostsNoAttempt(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			st := b.Open(t)
			addr := freeAddr(t)
			e1 := startEngine(t, st, addr, 0)
			g := newGatedJob()
			remoteWorkerAt(t, "http://"+addr, g.job)
			res, err := g.job.Enqueue(context.Background(), e1.eng, 1)
			if err != nil {
				t.Fatal(err)
			}
			<-g.entered
			e1.kill()
			close(g.gate) // the step finishes while the engine is down: its record is refused
			// Down for longer than the old resend budget (about 0.6s).
			time.Sleep(1500 * time.Millisecond)
			e2 := startEngine(t, st, addr, 0)
			run := awaitState(t, e2.eng, res.RunID, store.StateCompleted, 20*time.Second)
			if run.Attempt != 1 {
				t.Errorf("attempt %d, want 1: the outage spent an attempt", run.Attempt)
			}
			evs, err := e2.eng.History(context.Background(), res.RunID, 0)
			if err != nil {
				t.Fatal(err)
			}
			steps := 0
			for _, ev := range evs {
				switch {
				case ev.Kind == history.KindAttemptFailed:
					t.Errorf("history has %s: %v", ev.Kind, testenv.Kinds(evs))
				case ev.Kind == history.KindStepCompleted && ev.Name == "a":
					steps++
				}
			}
			if steps != 1 || g.runsA.Load() != 1 {
				t.Errorf("step a recorded %d times, ran %d times; want once each: %v", steps, g.runsA.Load(), testenv.Kinds(evs))
			}
		})
	}
}

// An outage longer than the lease: the worker gives the run up without recording a failure, and
// the engine's lease expiry hands it back without spending an attempt.
func TestEngineOutageLongerThanLeaseDropsTheClaimWithoutAFailure(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			st := b.Open(t)
			addr := freeAddr(t)
			const lease = 1500 * time.Millisecond
			e1 := startEngine(t, st, addr, lease)
			g := newGatedJob()
			remoteWorkerAt(t, "http://"+addr, g.job)
			res, err := g.job.Enqueue(context.Background(), e1.eng, 1)
			if err != nil {
				t.Fatal(err)
			}
			<-g.entered
			e1.kill()
			close(g.gate)
			time.Sleep(lease + time.Second)
			e2 := startEngine(t, st, addr, lease)
			run := awaitState(t, e2.eng, res.RunID, store.StateCompleted, 20*time.Second)
			if run.Attempt != 1 {
				t.Errorf("attempt %d, want 1", run.Attempt)
			}
			evs, _ := e2.eng.History(context.Background(), res.RunID, 0)
			for _, ev := range evs {
				if ev.Kind == history.KindAttemptFailed {
					t.Errorf("history has %s: %v", ev.Kind, testenv.Kinds(evs))
				}
			}
			if g.runsA.Load() != 2 {
				t.Errorf("step a ran %d times; want twice (the lease was truly lost)", g.runsA.Load())
			}
		})
	}
}

// killableTransport lets a test make a worker vanish the way a killed process does: every
// connection it holds is cut (the engine sees them close) and no new one can be made.
type killableTransport struct {
	base  *http.Transport
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

func newKillableTransport() *killableTransport {
	k := &killableTransport{}
	k.base = http.DefaultTransport.(*http.Transport).Clone()
	dial := (&net.Dialer{}).DialContext
	k.base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		k.mu.Lock()
		dead := k.dead
		k.mu.Unlock()
		if dead {
			return nil, &net.OpError{Op: "dial", Net: network, Err: errConnRefused}
		}
		c, err := dial(ctx, network, addr)
		if err == nil {
			k.mu.Lock()
			k.conns = append(k.conns, c)
			k.mu.Unlock()
		}
		return c, err
	}
	return k
}

// awaitSession waits until the worker attends its session on eng: it attends just after its
// start, and a test that kills it before then tests a worker the engine never knew was there.
func awaitSession(t *testing.T, eng *engine.Engine, workerID string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !eng.SessionLive(workerID); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("worker %s does not attend its session after 10s", workerID)
		}
	}
}

var errConnRefused = &net.AddrError{Err: "connection refused (the worker is dead)"}

func (k *killableTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return k.base.RoundTrip(r)
}

func (k *killableTransport) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead = true
	for _, c := range k.conns {
		_ = c.Close()
	}
	k.conns = nil
}

func (k *killableTransport) revive() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead = false
}

// A remote worker that dies mid-step (its connections close, it says nothing) has its claim
// handed back within about the session grace, far inside the lease, with no extra heartbeats:
// the engine notices on the session connection the worker keeps open.
func TestDeadWorkerIsReclaimedBeforeItsLeaseLapses(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			st := b.Open(t)
			addr := freeAddr(t)
			const lease = 20 * time.Second
			e := startEngine(t, st, addr, lease)
			g := newGatedJob()

			kt := newKillableTransport()
			c, err := api.NewClient("http://"+addr, "", api.WithHTTPClient(&http.Client{Transport: kt}))
			if err != nil {
				t.Fatal(err)
			}
			reg, _ := jobs.NewRegistry(g.job)
			doomed, err := worker.New(worker.Config{Frontend: c, Registry: reg, Logger: testenv.Logger(), PollWait: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := doomed.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			res, err := g.job.Enqueue(context.Background(), e.eng, 1)
			if err != nil {
				t.Fatal(err)
			}
			<-g.entered
			awaitSession(t, e.eng, doomed.ID())
			killed := time.Now()
			kt.kill()

			// Reclaimed while the dead worker's lease still had most of its 20s to run.
			r := awaitState(t, e.eng, res.RunID, store.StateReady, lease/2)
			reclaim := time.Since(killed)
			t.Logf("reclaimed %s after the kill (lease %s)", reclaim.Round(time.Millisecond), lease)
			if r.Attempt != 1 || r.WorkerID != "" {
				t.Errorf("reclaimed run at attempt %d for %q; want attempt 1 for anyone", r.Attempt, r.WorkerID)
			}

			// The dead worker comes back as a zombie: its late write is refused, not recorded.
			kt.revive()
			close(g.gate)
			remoteWorkerAt(t, "http://"+addr, g.job)
			run := awaitState(t, e.eng, res.RunID, store.StateCompleted, 10*time.Second)
			if run.Attempt != 1 {
				t.Errorf("completed at attempt %d, want 1", run.Attempt)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = doomed.Stop(ctx)
			c.Close()
		})
	}
}
