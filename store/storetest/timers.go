package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// sleeping makes run n suspended (sticky) on timers named t0, t1, … due at dues, each firing
// TimerFired.
func sleeping(t *testing.T, s store.Store, n int, dues ...time.Time) store.Run {
	t.Helper()
	r := running(t, s, n)
	tr := store.Transition{State: store.StateSuspended, Sticky: true}
	for i, due := range dues {
		name := "t" + string(rune('0'+i))
		fired := history.New(due, history.TimerFired{TimerName: name})
		tr.Timers = append(tr.Timers, store.Timer{Key: name, DueAt: due, Fire: &fired})
	}
	return applyOK(t, s, mutation(r, tr)).Run
}

func countKind(evs []history.Event, k history.Kind) int {
	n := 0
	for _, e := range evs {
		if e.Kind == k {
			n++
		}
	}
	return n
}

var timerTests = []test{
	{"FiresDueTimersInDueOrderUpToLimit", func(t *testing.T, s store.Store) {
		sleeping(t, s, 1, at(3*time.Hour))
		sleeping(t, s, 2, at(1*time.Hour))
		sleeping(t, s, 3, at(2*time.Hour))
		sleeping(t, s, 4, at(5*time.Hour))
		now := at(4 * time.Hour)
		var order []string
		for range 3 {
			w := fire(t, s, now, 1)
			if len(w) != 1 {
				t.Fatalf("TimerFire(limit 1) woke %v, want one run", wokenIDs(w))
			}
			order = append(order, w[0].RunID)
		}
		if want := []string{runID(2), runID(3), runID(1)}; !slices.Equal(order, want) {
			t.Errorf("fired in order %v, want %v", order, want)
		}
		if w := fire(t, s, now, 10); len(w) != 0 {
			t.Errorf("fired %v before they were due", wokenIDs(w))
		}
		wantState(t, s, runID(4), store.StateSuspended)
		if due, ok := timerNext(t, s); !ok || !due.Equal(at(5*time.Hour)) {
			t.Errorf("TimerNext = %v, %v; want %v", due, ok, at(5*time.Hour))
		}
	}},

	{"FireAppendsItsEventAndReadiesTheRun", func(t *testing.T, s store.Store) {
		r := sleeping(t, s, 1, sleepUntil)
		d := inState(t, s, 2, store.StateDelayed) // its timer has no Fire event
		now := sleepUntil.Add(5 * time.Second)
		w := fire(t, s, now, 10)
		want := []store.Woken{{RunID: r.ID, Queue: r.Queue, WorkerID: stickyOwner}, {RunID: d.ID, Queue: d.Queue}}
		if !sameSet(wokenIDs(w), wokenIDs(want)) {
			t.Fatalf("woke %+v, want %+v", w, want)
		}
		evs := events(t, s, r.ID)
		for _, x := range w {
			if x.RunID == r.ID && !sameWoken(x, want[0]) {
				t.Errorf("woken %+v, want %+v (the sticky worker kept)", x, want[0])
			}
			// When its timer was due, not when it fired: the timer service's lag is the gap.
			if !x.DueAt.Equal(sleepUntil) {
				t.Errorf("run %s woken with DueAt %v, want its timer's due time %v (fired at %v)", x.RunID, x.DueAt, sleepUntil, now)
			}
			// What the wake-up appended, as stored: the worker resumes from it without a read.
			switch {
			case x.RunID == r.ID && (len(x.Appended) != 1 || !sameEvent(x.Appended[0], evs[len(evs)-1])):
				t.Errorf("the slept run's wake-up says it appended %+v; its history ends %+v", x.Appended, evs[len(evs)-1])
			case x.RunID == d.ID && len(x.Appended) != 0:
				t.Errorf("the delayed run's wake-up says it appended %+v; its timer has no event", x.Appended)
			}
		}
		wantKinds(t, "slept run", evs, history.KindRunStarted, history.KindTimerFired)
		if evs[len(evs)-1].Name != "t0" {
			t.Errorf("fired event named %q, want t0", evs[len(evs)-1].Name)
		}
		wantKinds(t, "delayed run", events(t, s, d.ID), history.KindRunStarted)
		for _, id := range []string{r.ID, d.ID} {
			got := wantState(t, s, id, store.StateReady)
			wantTime(t, "ReadyAt", got.ReadyAt, now)
		}
		if got := get(t, s, r.ID); got.WorkerID != stickyOwner {
			t.Errorf("woken run's worker %q, want the sticky %s kept", got.WorkerID, stickyOwner)
		}
	}},

	{"AWakeUpRemovesTheRunsOtherTimersAndWaits", func(t *testing.T, s store.Store) {
		m := map[string]any{"order": 1}
		// The timeout comes first: the wait goes with it.
		timedOut := waiting(t, s, 1, "paid", m, base)
		if w := fire(t, s, sleepUntil, 10); !slices.Equal(wokenIDs(w), []string{timedOut.ID}) {
			t.Fatalf("timeout woke %v", wokenIDs(w))
		}
		if d := publish(t, s, event(t, 1, "paid", m, sleepUntil.Add(time.Second))).Delivered; len(d) != 0 {
			t.Errorf("an event was delivered to %v after its wait timed out", d)
		}
		wantKinds(t, "timed out", events(t, s, timedOut.ID), history.KindRunStarted,
			history.KindEventWaitStarted, history.KindEventWaitTimedOut)

		// The event comes first: the timeout goes with it.
		got := waiting(t, s, 2, "paid", map[string]any{"order": 2}, sleepUntil.Add(time.Hour))
		if d := publish(t, s, event(t, 2, "paid", map[string]any{"order": 2}, sleepUntil.Add(2*time.Hour))).Delivered; len(d) != 1 {
			t.Fatalf("publish delivered to %v", d)
		}
		if w := fire(t, s, at(10*time.Hour), 10); len(w) != 0 {
			t.Errorf("a timeout woke %v after its wait received the event", wokenIDs(w))
		}
		wantKinds(t, "received", events(t, s, got.ID), history.KindRunStarted,
			history.KindEventWaitStarted, history.KindEventReceived)

		// Two timers: the first to fire removes the other.
		two := sleeping(t, s, 3, at(11*time.Hour), at(12*time.Hour))
		if w := fire(t, s, at(13*time.Hour), 10); !slices.Equal(wokenIDs(w), []string{two.ID}) {
			t.Errorf("two due timers woke %v, want the run once", wokenIDs(w))
		}
		wantKinds(t, "two timers", events(t, s, two.ID), history.KindRunStarted, history.KindTimerFired)
		if due, ok := timerNext(t, s); ok {
			t.Errorf("a timer is left, due %v", due)
		}
	}},

	{"TimerOfARunNotParkedIsDropped", func(t *testing.T, s store.Store) {
		c := sleeping(t, s, 1, sleepUntil)
		cancel(t, s, c.ID, appliedAt)
		// A timer armed by a transition that kept the run running.
		r := running(t, s, 2)
		applyOK(t, s, mutation(r, store.Transition{Timers: []store.Timer{{Key: "x", DueAt: sleepUntil, Fire: timerFired("x")}}}))

		if w := fire(t, s, sleepUntil, 10); len(w) != 0 {
			t.Errorf("woke %v: neither run is suspended or delayed", wokenIDs(w))
		}
		wantState(t, s, c.ID, store.StateCancelled)
		if got := wantState(t, s, r.ID, store.StateRunning); got.Fence != r.Fence || got.WorkerID != r.WorkerID {
			t.Errorf("the running run's claim changed: %+v", got)
		}
		for _, id := range []string{c.ID, r.ID} {
			if n := countKind(events(t, s, id), history.KindTimerFired); n != 0 {
				t.Errorf("run %s: %d TimerFired appended", id, n)
			}
		}
		if due, ok := timerNext(t, s); ok {
			t.Errorf("a dropped timer is still armed, due %v", due)
		}
	}},

	{"TimerKeyIsUniquePerRun", func(t *testing.T, s store.Store) {
		r := running(t, s, 1)
		applyOK(t, s, mutation(r, store.Transition{Timers: []store.Timer{{Key: "k", DueAt: at(1 * time.Hour)}}}))
		applyOK(t, s, mutation(r, store.Transition{State: store.StateSuspended,
			Timers: []store.Timer{{Key: "k", DueAt: at(2 * time.Hour), Fire: timerFired("k")}}}))
		if due, ok := timerNext(t, s); !ok || !due.Equal(at(2*time.Hour)) {
			t.Errorf("TimerNext = %v, %v; want %v: re-arming a key replaces its timer", due, ok, at(2*time.Hour))
		}
		if w := fire(t, s, at(90*time.Minute), 10); len(w) != 0 {
			t.Errorf("the replaced timer woke %v", wokenIDs(w))
		}
		if w := fire(t, s, at(2*time.Hour), 10); len(w) != 1 {
			t.Errorf("the timer woke %v, want the run", wokenIDs(w))
		}
	}},

	{"TimerNext", func(t *testing.T, s store.Store) {
		if due, ok := timerNext(t, s); ok {
			t.Fatalf("TimerNext on an empty store = %v, true", due)
		}
		sleeping(t, s, 1, at(2*time.Hour))
		sleeping(t, s, 2, at(1*time.Hour))
		for _, want := range []time.Time{at(1 * time.Hour), at(2 * time.Hour)} {
			due, ok := timerNext(t, s)
			if !ok || !due.Equal(want) {
				t.Fatalf("TimerNext = %v, %v; want %v", due, ok, want)
			}
			fire(t, s, want, 10)
		}
		if due, ok := timerNext(t, s); ok {
			t.Errorf("TimerNext after every timer fired = %v, true", due)
		}
	}},

	{"ConcurrentFiringFiresEachTimerOnce", func(t *testing.T, s store.Store) {
		const runs = 100
		ps := make([]store.CreateRunParams, runs)
		for i := range ps {
			ps[i] = inQueue(i+1, "q", 0)
		}
		create(t, s, ps...)
		claimed := claim(t, s, claimParams("w", runs, "q"))
		ms := make([]store.Mutation, len(claimed))
		for i, r := range claimed {
			ms[i] = mutation(r, store.Transition{State: store.StateSuspended,
				Timers: []store.Timer{{Key: "sleep", DueAt: at(time.Duration(i%5) * time.Hour), Fire: timerFired("sleep")}}})
		}
		for _, res := range apply(t, s, ms...) {
			if res.Err != nil {
				t.Fatal(res.Err)
			}
		}
		woken := FireConcurrently(t, at(10*time.Hour), 7, s, s)
		if len(woken) != runs {
			t.Errorf("%d runs woken, want %d", len(woken), runs)
		}
		for _, r := range claimed {
			if n := woken[r.ID]; n != 1 {
				t.Errorf("run %s woken %d times", r.ID, n)
			}
			if n := countKind(events(t, s, r.ID), history.KindTimerFired); n != 1 {
				t.Errorf("run %s: %d TimerFired appended, want 1", r.ID, n)
			}
		}
	}},
}

// FireConcurrently has every store in stores (the same store more than once, or several stores
// on one database, as separate processes would) call TimerFire at now, limit timers a call, until
// nothing is due, all at once. It returns how often each run was woken, for the rule that two
// timer services never fire one timer twice.
func FireConcurrently(t testing.TB, now time.Time, limit int, stores ...store.Store) map[string]int {
	t.Helper()
	var mu sync.Mutex
	woken := map[string]int{}
	var wg sync.WaitGroup
	for _, s := range stores {
		wg.Go(func() {
			for {
				w, err := s.TimerFire(context.Background(), now, limit)
				if err != nil {
					t.Errorf("TimerFire: %v", err)
					return
				}
				if len(w) == 0 {
					return
				}
				mu.Lock()
				for _, x := range w {
					woken[x.RunID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return woken
}
