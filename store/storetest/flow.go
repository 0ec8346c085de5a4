package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/ultimat3/jobs/store"
)

// flowRun is run n of tenant in queue "q", ready at base+readyAt, with priority p.
func flowRun(n int, tenant string, readyAt time.Duration, p int) store.CreateRunParams {
	c := inQueue(n, "q", readyAt)
	c.Run.Tenant = tenant
	c.Run.Priority = p
	c.Started = started(c.Run)
	return c
}

// claimRound claims limit runs of queue q carrying the rotation, as the engine does.
func claimRound(t *testing.T, s store.Store, limit int, rot *map[string]string) []store.Run {
	t.Helper()
	p := claimParams("w", limit, "q")
	p.Rotation = *rot
	runs := claim(t, s, p)
	*rot = store.NextRotation(*rot, runs)
	return runs
}

var flowTests = []test{
	{"MixedCaseTenantsRotateEvenly", func(t *testing.T, s store.Store) {
		// The engine keeps the rotation in Go's byte order (store.NextRotation), where "B" comes
		// before "a"; a store that walked tenants in another order (a database collation that is
		// not bytewise) settled into a cycle serving some tenants twice as often as others.
		tenants := []string{"a", "B", "c", "D"}
		n := 0
		var ps []store.CreateRunParams
		for range 20 {
			for _, tn := range tenants {
				n++
				ps = append(ps, flowRun(n, tn, time.Duration(n)*time.Millisecond, 0))
			}
		}
		create(t, s, ps...)
		rot := map[string]string{}
		count := map[string]int{}
		for range 24 {
			for _, r := range claimRound(t, s, 2, &rot) {
				count[r.Tenant]++
			}
		}
		for _, tn := range tenants {
			if count[tn] != 12 {
				t.Fatalf("claims per tenant %v; want 12 each of 48 (two a round, in turn)", count)
			}
		}
	}},

	{"HigherPriorityFirstAndKept", func(t *testing.T, s store.Store) {
		create(t, s,
			flowRun(1, "a", 1*time.Millisecond, 0),
			flowRun(2, "a", 2*time.Millisecond, 5),
			flowRun(3, "a", 3*time.Millisecond, -1),
			flowRun(4, "a", 4*time.Millisecond, 0),
		)
		if got := get(t, s, runID(2)).Priority; got != 5 {
			t.Errorf("RunGet: priority %d, want 5", got)
		}
		var order []string
		for range 4 {
			order = append(order, claimOne(t, s, claimParams("w", 1, "q")).ID)
		}
		if want := []string{runID(2), runID(1), runID(4), runID(3)}; !slices.Equal(order, want) {
			t.Errorf("claim order %v, want %v", order, want)
		}
	}},

	{"ALowPriorityAgesToTheFront", func(t *testing.T, s store.Store) {
		// A priority level is a head start of PriorityStep: a run of priority 1 that became
		// ready two steps later does not overtake; one of priority 3 does.
		create(t, s,
			flowRun(1, "a", 0, 0),
			flowRun(2, "a", 2*store.PriorityStep, 1),
			flowRun(3, "a", 2*store.PriorityStep+time.Millisecond, 3),
		)
		got := claim(t, s, claimParams("w", 3, "q"))
		if want := []string{runID(3), runID(1), runID(2)}; !slices.Equal(ids(got), want) {
			t.Errorf("claim order %v, want %v", ids(got), want)
		}
	}},

	{"OneClaimAtATimeRotatesAcrossTenants", func(t *testing.T, s store.Store) {
		// Tenant a's backlog is older than b's runs; one-run claims still alternate.
		for n := 1; n <= 6; n++ {
			create(t, s, flowRun(n, "a", time.Duration(n)*time.Millisecond, 0))
		}
		create(t, s, flowRun(7, "b", 100*time.Millisecond, 0), flowRun(8, "b", 101*time.Millisecond, 0))
		rot := map[string]string{}
		var order []string
		for range 6 {
			order = append(order, ids(claimRound(t, s, 1, &rot))...)
		}
		want := []string{runID(1), runID(7), runID(2), runID(8), runID(3), runID(4)}
		if !slices.Equal(order, want) {
			t.Errorf("claim order %v, want %v", order, want)
		}
	}},

	{"ABatchTakesEveryTenantsHeadFirst", func(t *testing.T, s store.Store) {
		for n := 1; n <= 6; n++ {
			create(t, s, flowRun(n, "a", time.Duration(n)*time.Millisecond, 0))
		}
		create(t, s, flowRun(7, "b", 100*time.Millisecond, 0), flowRun(8, "b", 101*time.Millisecond, 0),
			flowRun(9, "c", 200*time.Millisecond, 0))
		rot := map[string]string{}
		got := claimRound(t, s, 4, &rot)
		if want := []string{runID(1), runID(7), runID(9), runID(2)}; !slices.Equal(ids(got), want) {
			t.Errorf("claim order %v, want %v", ids(got), want)
		}
		// The next round starts after a, the lane this one ended on.
		got = claimRound(t, s, 3, &rot)
		if want := []string{runID(8), runID(3), runID(4)}; !slices.Equal(ids(got), want) {
			t.Errorf("second round %v, want %v", ids(got), want)
		}
	}},

	{"AShortLaneLeavesItsShareToTheOthers", func(t *testing.T, s store.Store) {
		// b has one run where its share of a four-run claim is two: the claim is topped up from
		// a, ranked after every lane's head, rather than coming back with three runs. a's second
		// and third runs became ready together, so the top-up, which goes on past the second,
		// must tell them apart by id.
		for n := 1; n <= 6; n++ {
			at := time.Duration(n) * time.Millisecond
			if n == 3 {
				at = 2 * time.Millisecond
			}
			create(t, s, flowRun(n, "a", at, 0))
		}
		create(t, s, flowRun(7, "b", 100*time.Millisecond, 0))
		rot := map[string]string{}
		got := claimRound(t, s, 4, &rot)
		if want := []string{runID(1), runID(7), runID(2), runID(3)}; !slices.Equal(ids(got), want) {
			t.Errorf("claim order %v, want %v", ids(got), want)
		}
		// The next round: b is empty, a goes on.
		if got := claimRound(t, s, 2, &rot); !slices.Equal(ids(got), []string{runID(4), runID(5)}) {
			t.Errorf("second round %v, want %v", ids(got), []string{runID(4), runID(5)})
		}
	}},

	{"TheRotationWrapsAround", func(t *testing.T, s store.Store) {
		create(t, s, flowRun(1, "a", 1*time.Millisecond, 0), flowRun(2, "b", 2*time.Millisecond, 0),
			flowRun(3, "c", 3*time.Millisecond, 0))
		rot := map[string]string{"q": "b"}
		got := claimRound(t, s, 3, &rot)
		if want := []string{runID(3), runID(1), runID(2)}; !slices.Equal(ids(got), want) {
			t.Errorf("claim order after b: %v, want %v", ids(got), want)
		}
	}},

	{"ManyTenantsAreClaimedInRounds", func(t *testing.T, s store.Store) {
		// More tenants than the limit: every tenant is served within a few rounds.
		var ps []store.CreateRunParams
		tenants := []string{"t0", "t1", "t2", "t3", "t4", "t5", "t6"}
		for i, tn := range tenants {
			ps = append(ps, flowRun(i+1, tn, time.Duration(i)*time.Millisecond, 0))
		}
		create(t, s, ps...)
		rot := map[string]string{}
		seen := map[string]bool{}
		for range 3 {
			for _, r := range claimRound(t, s, 3, &rot) {
				seen[r.Tenant] = true
			}
		}
		if len(seen) != len(tenants) {
			t.Errorf("three rounds of 3 served %d tenants, want all %d", len(seen), len(tenants))
		}
	}},

	{"OldestFirstIgnoresTenantsAndPriority", func(t *testing.T, s store.Store) {
		create(t, s, flowRun(1, "a", 1*time.Millisecond, 0), flowRun(2, "a", 2*time.Millisecond, 0),
			flowRun(3, "b", 3*time.Millisecond, 50))
		p := claimParams("w", 3, "q")
		p.OldestFirst = true
		got := claim(t, s, p)
		if want := []string{runID(1), runID(2), runID(3)}; !slices.Equal(ids(got), want) {
			t.Errorf("oldest-first order %v, want %v", ids(got), want)
		}
	}},

	{"PriorityOutlivesAHandBack", func(t *testing.T, s store.Store) {
		create(t, s, flowRun(1, "a", 1*time.Millisecond, 0), flowRun(2, "a", 2*time.Millisecond, 2))
		r := claimOne(t, s, claimParams("w", 1, "q"))
		if r.ID != runID(2) {
			t.Fatalf("claimed %s first, want the priority run %s", r.ID, runID(2))
		}
		// Handed back ready later than run 1: its head start still puts it first.
		applyOK(t, s, mutation(r, store.Transition{State: store.StateReady, ReadyAt: at(time.Second)}))
		if got := claimOne(t, s, claimParams("w", 1, "q")); got.ID != runID(2) || got.Priority != 2 {
			t.Errorf("after the hand-back claimed %s (priority %d), want %s (2)", got.ID, got.Priority, runID(2))
		}
	}},
}
