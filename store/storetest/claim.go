package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// inQueue is run n in queue q, ready at base+readyAt.
func inQueue(n int, q string, readyAt time.Duration) store.CreateRunParams {
	p := runParams(n)
	p.Run.Queue = q
	p.Run.ReadyAt = at(readyAt)
	p.Started = started(p.Run)
	return p
}

var claimTests = []test{
	{"OldestReadyAtFirstThenID", func(t *testing.T, s store.Store) {
		create(t, s,
			inQueue(1, "q", 30*time.Millisecond),
			inQueue(2, "q", 10*time.Millisecond),
			inQueue(3, "q", 20*time.Millisecond),
			inQueue(4, "q", 10*time.Millisecond), // ties with 2: the id decides
		)
		var order []string
		for range 4 {
			order = append(order, claimOne(t, s, claimParams("w", 1, "q")).ID)
		}
		if want := []string{runID(2), runID(4), runID(3), runID(1)}; !slices.Equal(order, want) {
			t.Errorf("claim order %v, want %v", order, want)
		}
	}},

	{"OnlyTheNamedQueuesInReadyAtOrder", func(t *testing.T, s store.Store) {
		create(t, s,
			inQueue(1, "q1", 1*time.Millisecond),
			inQueue(2, "q2", 2*time.Millisecond),
			inQueue(3, "q3", 3*time.Millisecond),
			inQueue(4, "q1", 4*time.Millisecond),
		)
		var order []string
		for range 3 {
			order = append(order, claimOne(t, s, claimParams("w", 1, "q1", "q3")).ID)
		}
		if want := []string{runID(1), runID(3), runID(4)}; !slices.Equal(order, want) {
			t.Errorf("claim order over q1 and q3: %v, want %v", order, want)
		}
		if got := claim(t, s, claimParams("w", 10, "q1", "q3")); len(got) != 0 {
			t.Errorf("claimed %v after q1 and q3 were drained", ids(got))
		}
		wantState(t, s, runID(2), store.StateReady)
	}},

	{"AtMostLimit", func(t *testing.T, s store.Store) {
		for n := 1; n <= 5; n++ {
			create(t, s, inQueue(n, "q", time.Duration(n)*time.Millisecond))
		}
		got := claim(t, s, claimParams("w", 2, "q"))
		if want := []string{runID(1), runID(2)}; !sameSet(ids(got), want) {
			t.Errorf("claimed %v with Limit 2, want the two oldest %v", ids(got), want)
		}
		if rest := claim(t, s, claimParams("w", 10, "q")); len(rest) != 3 {
			t.Errorf("then claimed %d, want the 3 left", len(rest))
		}
	}},

	{"TakesTheLeaseAndBumpsTheFence", func(t *testing.T, s store.Store) {
		create(t, s, inQueue(1, "q", 0))
		r := claimOne(t, s, claimParams("w1", 1, "q"))
		for what, x := range map[string]store.Run{"claim": r, "RunGet": get(t, s, r.ID)} {
			if x.State != store.StateRunning || x.WorkerID != "w1" || x.Fence <= 0 {
				t.Errorf("%s: state %s, worker %q, fence %d; want running, w1, a fence above 0", what, x.State, x.WorkerID, x.Fence)
			}
			wantTime(t, what+" LeaseUntil", x.LeaseUntil, leaseUntil)
		}
		if got := claim(t, s, claimParams("w2", 10, "q")); len(got) != 0 {
			t.Errorf("a running run was claimed again: %v", ids(got))
		}

		// The lease lapses; another worker claims it with a new fence.
		if _, err := s.RunExpireLeases(t.Context(), leaseUntil.Add(time.Second), 10); err != nil {
			t.Fatal(err)
		}
		p := claimParams("w2", 1, "q")
		p.Now, p.StickyBefore, p.LeaseUntil = leaseUntil.Add(time.Second), leaseUntil.Add(time.Second), leaseUntil.Add(time.Hour)
		r2 := claimOne(t, s, p)
		if r2.Fence <= r.Fence || r2.WorkerID != "w2" {
			t.Errorf("second claim: fence %d, worker %q; want above %d, w2", r2.Fence, r2.WorkerID, r.Fence)
		}
		wantTime(t, "second claim LeaseUntil", r2.LeaseUntil, p.LeaseUntil)

		// Handed back, claimed a third time.
		applyOK(t, s, mutation(r2, store.Transition{State: store.StateReady, ReadyAt: appliedAt}))
		if r3 := claimOne(t, s, claimParams("w3", 1, "q")); r3.Fence <= r2.Fence {
			t.Errorf("third claim: fence %d, want above %d", r3.Fence, r2.Fence)
		}
	}},

	{"LeasesFromAReadyAtPastItsNow", func(t *testing.T, s store.Store) {
		// The claimer read its clock (claimedAt) before the runs became ready two minutes later
		// (a timer fired by a clock that had moved on): each lease runs its full length from
		// the run's ReadyAt, in either claim order, so the sweep at the ready clock's next
		// second leaves it held.
		lease := leaseUntil.Sub(claimedAt)
		for n, oldest := range map[int]bool{1: false, 2: true} {
			create(t, s, inQueue(n, "q", 2*time.Minute))
			p := claimParams("w", 1, "q")
			p.OldestFirst = oldest
			r := claimOne(t, s, p)
			wantTime(t, "LeaseUntil of a run ready after the claim's Now", r.LeaseUntil, at(2*time.Minute).Add(lease))
			if woken, err := s.RunExpireLeases(t.Context(), at(2*time.Minute+time.Second), 10); err != nil || len(woken) != 0 {
				t.Errorf("the sweep a second after the run became ready: %v, %v; want the lease held", wokenIDs(woken), err)
			}
			wantState(t, s, r.ID, store.StateRunning)
		}
	}},

	{"RefusesAClaimWithoutNowOrLeaseOrEndless", func(t *testing.T, s store.Store) {
		create(t, s, inQueue(1, "q", 0))
		noNow, noLease, endless := claimParams("w", 1, "q"), claimParams("w", 1, "q"), claimParams("w", 1, "q")
		noNow.Now, noLease.LeaseUntil = time.Time{}, time.Time{}
		endless.LeaseUntil = endless.Now.Add(store.MaxLease + time.Second)
		negative := claimParams("w", -1, "q") // the memory store sliced with it and panicked
		for what, p := range map[string]store.ClaimParams{"no Now": noNow, "no LeaseUntil": noLease, "a lease of centuries": endless,
			"a negative limit": negative} {
			runs, err := s.RunClaim(t.Context(), p)
			wantCode(t, "a claim with "+what, err, jobs.CodeBadRequest)
			if len(runs) != 0 {
				t.Errorf("a claim with %s took %v", what, ids(runs))
			}
		}
		wantState(t, s, runID(1), store.StateReady)
	}},

	{"StickyWindow", func(t *testing.T, s store.Store) {
		// Runs 1 and 2 wake (ready at sleepUntil) parked on w1; run 3, in run 1's queue, is a
		// fresh run that became ready after them.
		for _, n := range []int{1, 2} {
			suspend(t, s, running(t, s, n))
		}
		woken := fire(t, s, sleepUntil, 10)
		for _, w := range woken {
			if w.WorkerID != stickyOwner {
				t.Fatalf("woken %s with worker %q, want the sticky worker kept", w.RunID, w.WorkerID)
			}
		}
		create(t, s, inQueue(3, "q1", time.Hour+time.Second))

		inWindow := func(w string, q string) store.ClaimParams {
			p := claimParams(w, 1, q)
			p.Now = sleepUntil.Add(2 * time.Second)
			p.StickyBefore = sleepUntil.Add(-time.Second) // run 1 and 2 woke after this
			return p
		}
		// Another worker skips run 1 (in w1's window) and takes the younger run 3.
		if got := claim(t, s, inWindow("w2", "q1")); !slices.Equal(ids(got), []string{runID(3)}) {
			t.Errorf("w2 claimed %v in the sticky window, want only the unowned %s", ids(got), runID(3))
		}
		if got := claim(t, s, inWindow("w2", "q1")); len(got) != 0 {
			t.Errorf("w2 claimed %v: run 1 is in w1's sticky window", ids(got))
		}
		// The owner takes it at once.
		if got := claim(t, s, inWindow(stickyOwner, "q1")); !slices.Equal(ids(got), []string{runID(1)}) {
			t.Errorf("the sticky owner claimed %v, want %s", ids(got), runID(1))
		}
		// Once the window has passed (ReadyAt at or before StickyBefore), anyone may.
		p := inWindow("w2", "q2")
		p.StickyBefore = sleepUntil
		if got := claim(t, s, p); !slices.Equal(ids(got), []string{runID(2)}) {
			t.Errorf("w2 claimed %v after the window, want %s", ids(got), runID(2))
		}
	}},

	{"ConcurrentClaimersTakeEachRunOnce", func(t *testing.T, s store.Store) {
		const runs, claimers = 200, 8
		ps := make([]store.CreateRunParams, runs)
		for i := range ps {
			ps[i] = inQueue(i+1, "q", time.Duration(i%7)*time.Millisecond)
		}
		create(t, s, ps...)
		got := make([][]store.Run, claimers)
		var wg sync.WaitGroup
		for c := range claimers {
			wg.Go(func() {
				for {
					rs, err := s.RunClaim(t.Context(), claimParams("w", 5, "q"))
					if err != nil {
						t.Errorf("RunClaim: %v", err)
						return
					}
					if len(rs) == 0 {
						return
					}
					got[c] = append(got[c], rs...)
				}
			})
		}
		wg.Wait()
		seen := map[string]int{}
		for _, rs := range got {
			for _, r := range rs {
				seen[r.ID]++
				if r.Fence <= 0 {
					t.Errorf("run %s claimed with fence %d, want above 0", r.ID, r.Fence)
				}
			}
		}
		if len(seen) != runs {
			t.Errorf("%d distinct runs claimed, want %d", len(seen), runs)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("run %s claimed %d times", id, n)
			}
		}
	}},
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
