package memory_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// TestManyRuns drives 100k runs through create, claim, lookback, suspension, timer firing,
// publish and completion. Its point is that no step of the model scans every run, wait or
// event: a quadratic step at this size takes minutes instead of a second.
func TestManyRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("scale test")
	}
	const n = 100_000
	ctx := t.Context()
	s := memory.New()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := base.Add(time.Second)
	id := func(i int) string { return fmt.Sprintf("run-%09d", i) }
	publish := func(i int, at time.Time) int {
		res, err := s.RunPublish(ctx, store.PublishParams{ID: fmt.Sprint("e", i), Name: "e",
			Fields: []string{"id=" + id(i)}, Now: at})
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Delivered)
	}
	start := time.Now()

	ps := make([]store.CreateRunParams, n)
	for i := range ps {
		at := base.Add(time.Duration(i) * time.Microsecond)
		ps[i] = store.CreateRunParams{
			Run: store.Run{ID: id(i), Job: "job", Queue: fmt.Sprintf("q%d", i%4), Key: fmt.Sprint(i),
				State: store.StateReady, Attempt: 1, ReadyAt: at, CreatedAt: at},
			Started: history.New(at, history.RunStarted{Job: "job"}),
		}
	}
	if _, err := s.RunCreate(ctx, ps); err != nil {
		t.Fatal(err)
	}
	// Runs i%4 == 0 find their event by lookback; runs i%4 == 2 wait for it; odd runs sleep.
	for i := 0; i < n; i += 4 {
		publish(i, now)
	}

	var lookedBack, suspended int
	for {
		runs, err := s.RunClaim(ctx, store.ClaimParams{WorkerID: "w", Queues: []string{"q0", "q1", "q2", "q3"},
			Limit: 100, Now: now, LeaseUntil: now.Add(time.Minute), StickyBefore: now})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 0 {
			break
		}
		ms := make([]store.Mutation, len(runs))
		for j, r := range runs {
			tr := store.Transition{State: store.StateSuspended, Sticky: true,
				Timers: []store.Timer{{Key: "t", DueAt: now.Add(time.Hour)}}}
			if r.Queue == "q0" || r.Queue == "q2" {
				tr.Wait = &store.Wait{Name: "w", Event: "e", Match: []string{"id=" + r.ID}, LookbackFrom: base}
				tr.Timers[0].DueAt = now.Add(48 * time.Hour)
			}
			ms[j] = store.Mutation{RunID: r.ID, Fence: r.Fence, Now: now, Transition: tr}
		}
		res, err := s.RunApply(ctx, ms)
		if err != nil {
			t.Fatal(err)
		}
		var done []store.Mutation
		for j, x := range res {
			switch {
			case x.Err != nil:
				t.Fatal(x.Err)
			case x.Run.State == store.StateRunning:
				lookedBack++
				done = append(done, store.Mutation{RunID: x.Run.ID, Fence: runs[j].Fence, Now: now,
					Transition: store.Transition{State: store.StateCompleted}})
			default:
				suspended++
			}
		}
		if _, err := s.RunApply(ctx, done); err != nil {
			t.Fatal(err)
		}
	}
	fired := 0
	for {
		w, err := s.TimerFire(ctx, now.Add(2*time.Hour), 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(w) == 0 {
			break
		}
		fired += len(w)
	}
	delivered := 0
	for i := 2; i < n; i += 4 {
		delivered += publish(i, now.Add(3*time.Hour))
	}
	if lookedBack != n/4 || suspended != 3*n/4 || fired != n/2 || delivered != n/4 {
		t.Errorf("looked back %d, suspended %d, fired %d, delivered %d; want %d, %d, %d, %d",
			lookedBack, suspended, fired, delivered, n/4, 3*n/4, n/2, n/4)
	}
	if pruned, err := s.EventPrune(ctx, now.Add(4*time.Hour)); err != nil || pruned != n/2 {
		t.Errorf("EventPrune = %d, %v; want %d", pruned, err, n/2)
	}
	t.Logf("%d runs in %v", n, time.Since(start))
}
