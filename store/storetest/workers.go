package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// workerTests hold the backends to store.Workers: a worker known to be gone gives back at once
// what it held.
var workerTests = []test{
	{"ReleaseHandsBackClaimsAndEndsStickiness", func(t *testing.T, s store.Store) {
		claimed := leased(t, s, 1, stickyOwner, leaseUntil)
		other := leased(t, s, 2, "w2", leaseUntil)
		parked := inState(t, s, 3, store.StateSuspended) // sticky to stickyOwner
		woken := inState(t, s, 4, store.StateSuspended)
		if w := fire(t, s, sleepUntil, 0); len(w) != 2 {
			t.Fatalf("fired %v, want runs 3 and 4", wokenIDs(w))
		}
		// Run 3 sleeps again; run 4 is ready and reserved for its sticky worker.
		parked = suspend(t, s, claimOne(t, s, func() store.ClaimParams {
			p := claimParams(stickyOwner, 1, parked.Queue)
			p.Now, p.StickyBefore = sleepUntil, sleepUntil
			return p
		}()))
		if r := get(t, s, woken.ID); r.State != store.StateReady || r.WorkerID != stickyOwner {
			t.Fatalf("woken run is %s for %q, want ready for %q", r.State, r.WorkerID, stickyOwner)
		}

		now := sleepUntil.Add(time.Second)
		w, err := s.WorkerRelease(t.Context(), stickyOwner, now)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{claimed.ID, woken.ID}; !sameSet(wokenIDs(w), want) {
			t.Fatalf("released %v, want %v (the claim and the sticky ready run)", wokenIDs(w), want)
		}
		for _, x := range w {
			if x.Queue != get(t, s, x.RunID).Queue {
				t.Errorf("released %s named queue %q", x.RunID, x.Queue)
			}
			// Only the claim was taken back from a running body (the engine counts it as a
			// lease lost); the sticky run was waiting.
			if want := x.RunID == claimed.ID; x.Reclaimed != want {
				t.Errorf("released %s with Reclaimed %t, want %t", x.RunID, x.Reclaimed, want)
			}
		}

		got := wantState(t, s, claimed.ID, store.StateReady)
		if got.WorkerID != "" || !got.LeaseUntil.IsZero() {
			t.Errorf("released claim kept worker %q, lease %v", got.WorkerID, got.LeaseUntil)
		}
		wantTime(t, "released ReadyAt", got.ReadyAt, now)
		if got.Attempt != claimed.Attempt || got.LastSeq != claimed.LastSeq {
			t.Errorf("release spent an attempt or wrote history: attempt %d→%d, seq %d→%d",
				claimed.Attempt, got.Attempt, claimed.LastSeq, got.LastSeq)
		}
		// The old holder's late write is refused: the run is no longer running under its fence.
		res := apply(t, s, mutation(claimed, store.Transition{}, step("late")))
		wantCode(t, "write after release", res[0].Err, jobs.CodeJobLeaseLost)

		if r := wantState(t, s, other.ID, store.StateRunning); r.WorkerID != "w2" {
			t.Errorf("another worker's claim moved to %q", r.WorkerID)
		}
		if r := wantState(t, s, parked.ID, store.StateSuspended); r.WorkerID != "" {
			t.Errorf("suspended run still reserved for %q", r.WorkerID)
		}
		// The woken run is claimable by anyone at once, inside what was its sticky window.
		p := claimParams("w3", 1, woken.Queue)
		p.Now, p.StickyBefore = now, sleepUntil.Add(-time.Hour)
		if r := claimOne(t, s, p); r.ID != woken.ID || r.WorkerID != "w3" {
			t.Errorf("claimed %s for %q, want %s for w3", r.ID, r.WorkerID, woken.ID)
		}
		// A released claim too.
		p = claimParams("w3", 1, claimed.Queue)
		p.Now, p.StickyBefore = now, sleepUntil.Add(-time.Hour)
		if r := claimOne(t, s, p); r.Fence <= claimed.Fence {
			t.Errorf("reclaimed with fence %d, want above %d", r.Fence, claimed.Fence)
		}
	}},

	{"ReleaseOfAWorkerHoldingNothingChangesNothing", func(t *testing.T, s store.Store) {
		r := leased(t, s, 1, "w2", leaseUntil)
		w, err := s.WorkerRelease(t.Context(), "nobody", appliedAt)
		if err != nil || len(w) != 0 {
			t.Errorf("WorkerRelease(nobody) = %v, %v; want nothing", wokenIDs(w), err)
		}
		if got := wantState(t, s, r.ID, store.StateRunning); got.WorkerID != "w2" || !got.LeaseUntil.Equal(r.LeaseUntil) {
			t.Errorf("run changed: worker %q, lease %v", got.WorkerID, got.LeaseUntil)
		}
		_, err = s.WorkerRelease(t.Context(), "", appliedAt)
		wantCode(t, "release of no worker", err, jobs.CodeBadRequest)
		wantState(t, s, r.ID, store.StateRunning)
	}},
}

// firedAtTests: a timer's event is stamped with when it fired, not when it was due, so lateness
// (an engine that was down) is readable from the history.
var firedAtTests = []test{
	{"FiredEventCarriesTheFiringTime", func(t *testing.T, s store.Store) {
		r := running(t, s, 1)
		fired := history.New(sleepUntil, history.TimerFired{TimerName: "nap", DueAt: sleepUntil})
		applyOK(t, s, mutation(r, store.Transition{State: store.StateSuspended,
			Timers: []store.Timer{{Key: "sleep:nap", DueAt: sleepUntil, Fire: &fired}}}))
		late := sleepUntil.Add(20 * time.Second)
		if w := fire(t, s, late, 0); !slices.Equal(wokenIDs(w), []string{r.ID}) {
			t.Fatalf("fired %v, want %s", wokenIDs(w), r.ID)
		}
		evs := events(t, s, r.ID)
		last := evs[len(evs)-1]
		if last.Kind != history.KindTimerFired {
			t.Fatalf("last event %s, want TimerFired", last.Kind)
		}
		wantTime(t, "TimerFired.At", last.At, late)
		p, err := last.Decode()
		if err != nil {
			t.Fatal(err)
		}
		wantTime(t, "TimerFired.DueAt", p.(history.TimerFired).DueAt, sleepUntil)
	}},
}
