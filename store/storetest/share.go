package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// A claim for several workers at once (store/share.go). Each test runs in the fair order and in
// the oldest-first order: the split is the same rule over either order.

// shared claims for the shares (worker, limit, worker, limit, …) over queues at claimedAt.
func shared(oldestFirst bool, queues []string, shares ...any) store.ClaimParams {
	p := store.ClaimParams{Queues: queues, Now: claimedAt, LeaseUntil: leaseUntil, StickyBefore: claimedAt,
		OldestFirst: oldestFirst}
	for i := 0; i+1 < len(shares); i += 2 {
		p.Shares = append(p.Shares, store.ClaimShare{WorkerID: shares[i].(string), Limit: shares[i+1].(int)})
	}
	return p
}

// workersOf is each run's id with its WorkerID, as "id@worker", in the order given.
func workersOf(runs []store.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID + "@" + r.WorkerID
	}
	return out
}

// claimShared makes claim p and checks that it took want ("id@worker", in claim order).
func claimShared(t *testing.T, s store.Store, what string, p store.ClaimParams, want ...string) {
	t.Helper()
	if got := workersOf(claim(t, s, p)); !slices.Equal(got, want) {
		t.Errorf("%s (oldest first %v): claimed %v, want %v", what, p.OldestFirst, got, want)
	}
}

// heldBy creates run n in queue q and parks it on a sleep sticky to worker w, then fires the
// timer: the run is ready at sleepUntil, held for w until its sticky window passes.
func heldBy(t *testing.T, s store.Store, n int, q, w string) {
	t.Helper()
	create(t, s, inQueue(n, q, time.Duration(n)*time.Millisecond))
	r := claimOne(t, s, claimParams(w, 1, q))
	suspend(t, s, r)
	if woken := fire(t, s, sleepUntil, 10); len(woken) != 1 || woken[0].WorkerID != w {
		t.Fatalf("woke %v, want run %d held for %s", woken, n, w)
	}
}

// inWindow moves a claim to just after the sleepers woke, while their sticky windows last.
func inWindow(p store.ClaimParams) store.ClaimParams {
	p.Now = sleepUntil.Add(2 * time.Second)
	p.LeaseUntil = p.Now.Add(time.Minute)
	p.StickyBefore = sleepUntil.Add(-time.Second)
	return p
}

// bothOrders runs f in the fair order and then oldest first, on the one store: each on queues and
// run numbers of its own ("a…" and 0 for fair, "b…" and 100 for oldest first; q names a queue).
func bothOrders(f func(t *testing.T, s store.Store, oldest bool, base int)) func(t *testing.T, s store.Store) {
	return func(t *testing.T, s store.Store) {
		f(t, s, false, 0)
		f(t, s, true, 100)
	}
}

// q names queue name in the order's own set.
func q(oldestFirst bool, name string) string {
	if oldestFirst {
		return "b-" + name
	}
	return "a-" + name
}

var shareTests = []test{
	{"FreeRunsFillTheSharesInOrder", bothOrders(func(t *testing.T, s store.Store, oldest bool, base int) {
		for n := 1; n <= 5; n++ {
			create(t, s, inQueue(base+n, q(oldest, "q"), time.Duration(n)*time.Millisecond))
		}
		got := claim(t, s, shared(oldest, []string{q(oldest, "q")}, "w1", 2, "w2", 2))
		want := []string{runID(base+1) + "@w1", runID(base+2) + "@w1", runID(base+3) + "@w2", runID(base+4) + "@w2"}
		if !slices.Equal(workersOf(got), want) {
			t.Errorf("oldest first %v: claimed %v, want %v", oldest, workersOf(got), want)
		}
		for _, r := range got {
			if x := get(t, s, r.ID); x.State != store.StateRunning || x.WorkerID != r.WorkerID {
				t.Errorf("oldest first %v: run %s is %s for %q, want running for %q", oldest, r.ID, x.State, x.WorkerID, r.WorkerID)
			}
		}
		wantState(t, s, runID(base+5), store.StateReady)
	})},

	{"AHeldRunGoesToItsHoldersShare", bothOrders(func(t *testing.T, s store.Store, oldest bool, base int) {
		qq := q(oldest, "q")
		heldBy(t, s, base+1, qq, "w2")
		create(t, s, inQueue(base+2, qq, time.Hour+time.Second), inQueue(base+3, qq, time.Hour+2*time.Second))
		// w1's share comes first, but run 1 is held for w2: w1 takes the free runs.
		claimShared(t, s, "claimed", inWindow(shared(oldest, []string{qq}, "w1", 2, "w2", 1)),
			runID(base+1)+"@w2", runID(base+2)+"@w1", runID(base+3)+"@w1")
	})},

	{"AHeldRunPastItsHoldersShareStaysReady", bothOrders(func(t *testing.T, s store.Store, oldest bool, base int) {
		qq := q(oldest, "q")
		heldBy(t, s, base+1, qq, "w2")
		heldBy(t, s, base+2, qq, "w2")
		create(t, s, inQueue(base+3, qq, time.Hour+time.Second))
		// The candidates are the first two in claim order, runs 1 and 2, both held for w2, whose
		// share has room for one: run 2 stays ready, and run 3 was not a candidate.
		claimShared(t, s, "claimed", inWindow(shared(oldest, []string{qq}, "w1", 1, "w2", 1)),
			runID(base+1)+"@w2")
		if r2 := wantState(t, s, runID(base+2), store.StateReady); r2.WorkerID != "w2" {
			t.Errorf("oldest first %v: run 2 left with worker %q, want w2's", oldest, r2.WorkerID)
		}
		// Still held for w2: w1 alone takes only run 3.
		claimShared(t, s, "w1 alone", inWindow(shared(oldest, []string{qq}, "w1", 5)),
			runID(base+3)+"@w1")
		claimShared(t, s, "then", inWindow(shared(oldest, []string{qq}, "w1", 5, "w2", 5)),
			runID(base+2)+"@w2")
	})},

	{"ARunHeldForAnotherWorkerIsNotClaimed", bothOrders(func(t *testing.T, s store.Store, oldest bool, base int) {
		qq := q(oldest, "q")
		heldBy(t, s, base+1, qq, "w3")
		create(t, s, inQueue(base+2, qq, time.Hour+time.Second))
		claimShared(t, s, "claimed", inWindow(shared(oldest, []string{qq}, "w1", 5, "w2", 5)),
			runID(base+2)+"@w1")
		wantState(t, s, runID(base+1), store.StateReady)
	})},

	{"AShareOfNoneGetsNothing", bothOrders(func(t *testing.T, s store.Store, oldest bool, base int) {
		qq := q(oldest, "q")
		for n := 1; n <= 3; n++ {
			create(t, s, inQueue(base+n, qq, time.Duration(n)*time.Millisecond))
		}
		claimShared(t, s, "claimed", shared(oldest, []string{qq}, "w1", 0, "w2", 2),
			runID(base+1)+"@w2", runID(base+2)+"@w2")
	})},

	{"RefusesSharesItCannotTellApart", func(t *testing.T, s store.Store) {
		create(t, s, inQueue(1, "q", 0))
		twice := shared(false, []string{"q"}, "w1", 1, "w1", 1)
		unnamed := shared(false, []string{"q"}, "", 1)
		negative := shared(false, []string{"q"}, "w1", -1)
		both := shared(false, []string{"q"}, "w1", 1)
		both.WorkerID, both.Limit = "w2", 1
		tooMany := shared(false, []string{"q"})
		for i := range store.MaxShares + 1 {
			tooMany.Shares = append(tooMany.Shares, store.ClaimShare{WorkerID: runID(i), Limit: 1})
		}
		for what, p := range map[string]store.ClaimParams{"a worker twice": twice, "a share without a worker": unnamed,
			"a negative limit": negative, "both WorkerID and Shares": both, "too many shares": tooMany} {
			runs, err := s.RunClaim(t.Context(), p)
			wantCode(t, "a claim with "+what, err, jobs.CodeBadRequest)
			if len(runs) != 0 {
				t.Errorf("a claim with %s took %v", what, ids(runs))
			}
		}
		wantState(t, s, runID(1), store.StateReady)
	}},
}
