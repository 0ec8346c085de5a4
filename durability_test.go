package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// A timer that fires late (the engine was down when it came due) says so in the history: the
// event's time is when it fired, its DueAt when it was due, and the trace shows the lateness.
func TestTimerFiredRecordsWhenItFired(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		j := jobs.MustDefine("late-nap", func(in int) string { return "k" }, jobs.NoTenant[int](),
			func(ctx *jobs.Ctx, in int) (int, error) {
				if err := jobs.Sleep(ctx, "nap", time.Hour); err != nil {
					return 0, err
				}
				return jobs.Step(ctx, "after", func(context.Context) (int, error) { return in, nil })
			})
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, 1)
		env.Await(id, store.StateSuspended)
		var due time.Time
		for _, ev := range env.History(id) {
			if p, _ := ev.Decode(); ev.Kind == history.KindTimerStarted {
				due = p.(history.TimerStarted).WakeAt
			}
		}
		// Nothing fires during the outage; the clock moves on 20s past the due time.
		env.Advance(time.Hour + 20*time.Second)
		env.Await(id, store.StateCompleted)

		var fired *history.Event
		for _, ev := range env.History(id) {
			if ev.Kind == history.KindTimerFired {
				fired = &ev
			}
		}
		if fired == nil {
			t.Fatalf("no TimerFired in %v", testenv.Kinds(env.History(id)))
		}
		if want := due.Add(20 * time.Second); !fired.At.Equal(want) {
			t.Errorf("TimerFired at %s, want the firing time %s (due %s)", fired.At, want, due)
		}
		p, err := fired.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if got := p.(history.TimerFired).DueAt; !got.Equal(due) {
			t.Errorf("TimerFired.DueAt %s, want %s", got, due)
		}
		v, err := env.Engine.InspectRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Steps) == 0 || v.Steps[0].Kind != "sleep" || v.Steps[0].LateSeconds != 20 {
			t.Errorf("trace %+v: want the sleep 20s late", v.Steps)
		}
	})
}

// A history written before TimerFired carried its due time still reads: no lateness is shown.
func TestOldTimerFiredDecodes(t *testing.T) {
	old := struct {
		TimerName string `msgpack:"name"`
	}{"nap"}
	data, err := jobs.Encode(old)
	if err != nil {
		t.Fatal(err)
	}
	ev := history.Event{Kind: history.KindTimerFired, Name: "nap", At: time.Unix(100, 0), Data: data}
	p, err := ev.Decode()
	if err != nil {
		t.Fatal(err)
	}
	if f := p.(history.TimerFired); f.TimerName != "nap" || !f.DueAt.IsZero() {
		t.Errorf("decoded %+v, want name nap and no due time", f)
	}
}

// blockingJob's step waits for its gate (ignoring its context, like code that cannot be
// interrupted), so a test can stop a worker while the run is in flight.
func blockingJob(gate <-chan struct{}, entered chan<- string) *jobs.Job[int, int] {
	return jobs.MustDefine("blocking", func(in int) string { return "k" }, jobs.NoTenant[int](),
		func(ctx *jobs.Ctx, in int) (int, error) {
			return jobs.Step(ctx, "wait", func(context.Context) (int, error) {
				entered <- ctx.Run().RunID
				<-gate
				return in, nil
			})
		})
}

// A session dropped beside another attend under the same id releases nothing: anyone with a
// worker credential can open an attend under a live worker's id and cut it, and that drop must
// not hand back the claims of the worker still attending. The worker's own drop still does.
func TestADropBesideALiveAttendReleasesNothing(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		gate, entered := make(chan struct{}), make(chan string, 1)
		defer close(gate)
		j := blockingJob(gate, entered)
		env.Worker(worker.Config{ID: "host-a"}, j)
		id := enqueue(t, env, j, 1)
		<-entered
		for deadline := time.Now().Add(10 * time.Second); !env.Engine.SessionLive("host-a"); {
			if time.Now().After(deadline) {
				t.Fatal("the worker's session is not live after 10s")
			}
			time.Sleep(time.Millisecond)
		}
		held, _ := env.Engine.GetRun(context.Background(), id)
		// The forger's attend under host-a's id, cut at once.
		env.Engine.SessionOpened("host-a")
		env.Engine.SessionDropped("host-a")
		env.Advance(2 * time.Second) // past the session grace (1s), well within the lease
		for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if run, _ := env.Engine.GetRun(context.Background(), id); run.State != store.StateRunning || run.WorkerID != "host-a" || run.Fence != held.Fence {
				t.Fatalf("a drop beside the live attend moved the run to %s for %q at fence %d", run.State, run.WorkerID, run.Fence)
			}
		}
		if !env.Engine.SessionLive("host-a") {
			t.Fatal("the worker's own attend is no longer live after the forger's drop")
		}
	})
}

// A worker's clean stop hands back at once the claims that outlived its drain: the run is
// claimable again without waiting out its lease, and without an attempt spent.
func TestCleanStopReleasesClaimsAtOnce(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		gate, entered := make(chan struct{}), make(chan string, 1)
		defer close(gate)
		j := blockingJob(gate, entered)
		w := env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, 1)
		<-entered
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_ = w.Stop(ctx) // the drain runs out: the step is still in flight
		// The fake clock has not moved: only the stop can have released the claim.
		run, err := env.Engine.GetRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if run.State != store.StateReady || run.WorkerID != "" || run.Attempt != 1 {
			t.Fatalf("after a clean stop the run is %s for %q at attempt %d; want ready for anyone at attempt 1",
				run.State, run.WorkerID, run.Attempt)
		}
	})
}

// A run parked in a worker that stops cleanly is no longer reserved for it: its wake-up is
// claimable by any worker at once, not after the sticky window.
func TestCleanStopEndsStickyReservations(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		j := jobs.MustDefine("napper", func(in int) string { return "k" }, jobs.NoTenant[int](),
			func(ctx *jobs.Ctx, in int) (int, error) {
				if err := jobs.Sleep(ctx, "nap", time.Hour); err != nil {
					return 0, err
				}
				return in, nil
			})
		w := env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, 1)
		run := env.Await(id, store.StateSuspended)
		if run.WorkerID != w.ID() {
			t.Fatalf("suspended run reserved for %q, want the parking worker %q", run.WorkerID, w.ID())
		}
		if err := w.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if run, _ = env.Engine.GetRun(context.Background(), id); run.WorkerID != "" {
			t.Fatalf("after a clean stop the run is still reserved for %q", run.WorkerID)
		}
		env.Advance(time.Hour)
		if run, _ = env.Engine.GetRun(context.Background(), id); run.State != store.StateReady || run.WorkerID != "" {
			t.Fatalf("woken run is %s for %q; want ready for anyone", run.State, run.WorkerID)
		}
	})
}

// A worker that starts under the id of one that died releases what the dead one held.
func TestWorkerStartUnderTheSameIDReleasesTheOldClaims(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		gate, entered := make(chan struct{}), make(chan string, 1)
		defer close(gate)
		j := blockingJob(gate, entered)
		env.Worker(worker.Config{ID: "host-a"}, j)
		id := enqueue(t, env, j, 1)
		<-entered
		// A new id supersedes nothing.
		if err := env.Engine.WorkerStart(context.Background(), frontend.Session{WorkerID: "host-b"}); err != nil {
			t.Fatal(err)
		}
		if run, _ := env.Engine.GetRun(context.Background(), id); run.State != store.StateRunning || run.WorkerID != "host-a" {
			t.Fatalf("another worker's start moved the run to %s for %q", run.State, run.WorkerID)
		}
		// A start under the id of a worker that is alive (it attends its session) is not its
		// restart: refused, nothing released (X_WORKER_LIVE, engine/sessions_live.go). The
		// worker attends just after its start, and may claim first: wait for the session.
		for deadline := time.Now().Add(10 * time.Second); !env.Engine.SessionLive("host-a"); {
			if time.Now().After(deadline) {
				t.Fatal("the worker's session is not live after 10s")
			}
			time.Sleep(time.Millisecond)
		}
		held, _ := env.Engine.GetRun(context.Background(), id)
		if err := env.Engine.WorkerStart(context.Background(), frontend.Session{WorkerID: "host-a"}); !jobs.HasCode(err, jobs.CodeWorkerLive) {
			t.Fatalf("start under a live worker's id: %v, want X_WORKER_LIVE", err)
		}
		if run, _ := env.Engine.GetRun(context.Background(), id); run.State != store.StateRunning || run.WorkerID != "host-a" || run.Fence != held.Fence {
			t.Fatalf("a refused start moved the run to %s for %q at fence %d", run.State, run.WorkerID, run.Fence)
		}
		// The process dies (its session drops) and restarts under the same id: the start
		// releases what the dead one held at once, without waiting out the session grace.
		env.Engine.SessionDropped("host-a")
		if err := env.Engine.WorkerStart(context.Background(), frontend.Session{WorkerID: "host-a"}); err != nil {
			t.Fatal(err)
		}
		run, _ := env.Engine.GetRun(context.Background(), id)
		// The live worker may claim the released run again at once: then under a new fence.
		if reclaimed := run.State == store.StateRunning && run.Fence > held.Fence; !reclaimed && (run.State != store.StateReady || run.WorkerID != "") || run.Attempt != 1 {
			t.Fatalf("after a restart under the same id the run is %s for %q at attempt %d; want ready at 1", run.State, run.WorkerID, run.Attempt)
		}
	})
}
