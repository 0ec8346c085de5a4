package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/ultimat3/jobs/store"
)

var searchTests = []test{
	{"FiltersNewestFirstAndPagesByKey", func(t *testing.T, s store.Store) {
		mk := func(n int, job, queue, tenant, key string) store.CreateRunParams {
			p := runParams(n)
			p.Run.Job, p.Run.Queue, p.Run.Tenant, p.Run.Key = job, queue, tenant, key
			p.Started = started(p.Run)
			return p
		}
		// Run n is created at base + n ms.
		create(t, s, mk(1, "a", "q1", "t1", "k1"), mk(2, "b", "q1", "t2", "k2"), mk(3, "a", "q2", "t1", "k3"),
			mk(4, "a", "q1", "t2", "shared"), mk(5, "b", "q2", "t1", "shared"))
		cancel(t, s, runID(2), appliedAt)
		ms := func(n int) time.Time { return at(time.Duration(n) * time.Millisecond) }
		q := func(l store.ListParams) store.RunQuery { return store.RunQuery{ListParams: l} }
		for _, c := range []struct {
			q    store.RunQuery
			want []int
		}{
			{store.RunQuery{}, []int{5, 4, 3, 2, 1}},
			{q(store.ListParams{Queue: "q1"}), []int{4, 2, 1}},
			{q(store.ListParams{State: store.StateCancelled}), []int{2}},
			{q(store.ListParams{Job: "a", Tenant: "t1"}), []int{3, 1}},
			{q(store.ListParams{Queue: "q1", State: store.StateReady, Limit: 1}), []int{4}},
			{q(store.ListParams{Before: runID(4), Limit: 2}), []int{3, 2}},
			{store.RunQuery{Key: "shared"}, []int{5, 4}},
			{store.RunQuery{Key: "shared", ListParams: store.ListParams{Job: "a"}}, []int{4}},
			{store.RunQuery{Key: "nope"}, nil},
			{store.RunQuery{CreatedFrom: ms(2)}, []int{5, 4, 3, 2}},
			{store.RunQuery{CreatedTo: ms(2)}, []int{1}},
			{store.RunQuery{CreatedFrom: ms(2), CreatedTo: ms(4)}, []int{3, 2}},
			{store.RunQuery{CreatedFrom: ms(2), CreatedTo: ms(5), ListParams: store.ListParams{Before: runID(4)}}, []int{3, 2}},
			{store.RunQuery{CreatedFrom: ms(6)}, nil},
		} {
			runs, err := s.RunSearch(t.Context(), c.q)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, n := range c.want {
				want = append(want, runID(n))
			}
			if got := ids(runs); !slices.Equal(got, want) {
				t.Errorf("RunSearch(%+v) = %v, want %v", c.q, got, want)
			}
		}
		// A listing returns whole rows, as RunGet does.
		runs, err := s.RunSearch(t.Context(), store.RunQuery{ListParams: store.ListParams{State: store.StateCancelled}})
		if err != nil || len(runs) != 1 {
			t.Fatalf("RunSearch(cancelled) = %v, %v", runs, err)
		}
		if g := get(t, s, runID(2)); g.Key != runs[0].Key || g.State != runs[0].State || !g.FinishedAt.Equal(runs[0].FinishedAt) {
			t.Errorf("RunSearch row %+v differs from RunGet %+v", runs[0], g)
		}
	}},

	// A key live for several tenants at once (store.LiveKey): the key search lists every run
	// with the key, live or not, newest first and a page at a time, and with a tenant (what a
	// tenant-scoped caller's search carries) only that tenant's.
	{"ByKeyListsEveryTenantsLiveRuns", func(t *testing.T, s store.Store) {
		create(t, s, tenantRun(1, "shared", "a"))
		cancel(t, s, runID(1), appliedAt)
		create(t, s, tenantRun(2, "shared", "a"), tenantRun(3, "shared", "b"), tenantRun(4, "shared", ""),
			tenantRun(5, "other", "b"))
		running(t, s, 6) // another key
		if got, want := SearchIDs(t, s, store.RunQuery{Key: "shared", ListParams: store.ListParams{Limit: 2}}),
			[]string{runID(4), runID(3), runID(2), runID(1)}; !slices.Equal(got, want) {
			t.Errorf("search by key: %v, want %v", got, want)
		}
		for tenant, want := range map[string][]string{"a": {runID(2), runID(1)}, "b": {runID(3)}} {
			got := SearchIDs(t, s, store.RunQuery{Key: "shared", ListParams: store.ListParams{Tenant: tenant, Limit: 1}})
			if !slices.Equal(got, want) {
				t.Errorf("search by key for tenant %q: %v, want %v", tenant, got, want)
			}
		}
		got := SearchIDs(t, s, store.RunQuery{Key: "shared", ListParams: store.ListParams{State: store.StateReady, Limit: 5}})
		if want := []string{runID(4), runID(3), runID(2)}; !slices.Equal(got, want) {
			t.Errorf("search by key, ready: %v, want %v", got, want)
		}
	}},

	{"FinishedCountsByQueueStateAndBucket", func(t *testing.T, s store.Store) {
		create(t, s, inQueue(1, "qa", 0), inQueue(2, "qa", 0), inQueue(3, "qa", 0), inQueue(4, "qb", 0),
			inQueue(5, "qb", 0), inQueue(6, "qa", 0))
		since := at(10 * time.Minute)
		cancel(t, s, runID(1), since.Add(-time.Second))              // before the window: not counted
		cancel(t, s, runID(2), since)                                // bucket 0 (the start is inclusive)
		cancel(t, s, runID(3), since.Add(59*time.Second))            // bucket 0
		cancel(t, s, runID(4), since.Add(61*time.Second))            // bucket 1
		cancel(t, s, runID(5), since.Add(2*time.Minute+time.Second)) // bucket 2
		// run 6 stays ready: unfinished runs are never counted.
		got, err := s.RunFinishedCounts(t.Context(), since, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		want := []store.FinishedCount{
			{Queue: "qa", State: store.StateCancelled, Bucket: 0, Count: 2},
			{Queue: "qb", State: store.StateCancelled, Bucket: 1, Count: 1},
			{Queue: "qb", State: store.StateCancelled, Bucket: 2, Count: 1},
		}
		if !slices.Equal(got, want) {
			t.Errorf("RunFinishedCounts = %+v, want %+v", got, want)
		}
		if _, err := s.RunFinishedCounts(t.Context(), since, 0); err == nil {
			t.Error("RunFinishedCounts with a zero width: no error")
		}
	}},
}
