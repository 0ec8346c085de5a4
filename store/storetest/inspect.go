package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

var inspectTests = []test{
	{"UnknownRunIsNotFound", func(t *testing.T, s store.Store) {
		_, err := s.RunGet(t.Context(), runID(99))
		wantCode(t, "RunGet", err, jobs.CodeRunNotFound)
		_, err = s.HistoryRead(t.Context(), runID(99), 0, 0)
		wantCode(t, "HistoryRead", err, jobs.CodeRunNotFound)
	}},

	{"HistoryReadPages", func(t *testing.T, s store.Store) {
		r := running(t, s, 1)
		for i := range 5 {
			applyOK(t, s, mutation(r, store.Transition{}, step(fmt.Sprintf("s%d", i))))
		}
		for _, c := range []struct {
			after int64
			limit int
			want  []int64
		}{
			{0, 0, []int64{1, 2, 3, 4, 5, 6}},
			{0, -1, []int64{1, 2, 3, 4, 5, 6}},
			{2, 0, []int64{3, 4, 5, 6}},
			{2, 2, []int64{3, 4}},
			{5, 10, []int64{6}},
			{6, 0, nil},
			{60, 0, nil},
		} {
			evs, err := s.HistoryRead(t.Context(), r.ID, c.after, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			var seqs []int64
			for _, e := range evs {
				seqs = append(seqs, e.Seq)
			}
			if !slices.Equal(seqs, c.want) {
				t.Errorf("HistoryRead(after %d, limit %d) seqs %v, want %v", c.after, c.limit, seqs, c.want)
			}
		}
	}},

	{"ListFiltersNewestFirstAndPages", func(t *testing.T, s store.Store) {
		mk := func(n int, job, queue, tenant string) store.CreateRunParams {
			p := runParams(n)
			p.Run.Job, p.Run.Queue, p.Run.Tenant = job, queue, tenant
			p.Started = started(p.Run)
			return p
		}
		create(t, s, mk(1, "a", "q1", "t1"), mk(2, "b", "q1", "t2"), mk(3, "a", "q2", "t1"),
			mk(4, "a", "q1", "t2"), mk(5, "b", "q2", "t1"))
		cancel(t, s, runID(2), appliedAt)
		for _, c := range []struct {
			p    store.ListParams
			want []int
		}{
			{store.ListParams{}, []int{5, 4, 3, 2, 1}},
			{store.ListParams{Queue: "q1"}, []int{4, 2, 1}},
			{store.ListParams{State: store.StateCancelled}, []int{2}},
			{store.ListParams{Job: "a"}, []int{4, 3, 1}},
			{store.ListParams{Tenant: "t1"}, []int{5, 3, 1}},
			{store.ListParams{Queue: "q1", Job: "a"}, []int{4, 1}},
			{store.ListParams{Queue: "q1", State: store.StateReady}, []int{4, 1}},
			{store.ListParams{Limit: 2}, []int{5, 4}},
			{store.ListParams{Before: runID(4), Limit: 2}, []int{3, 2}},
			{store.ListParams{Before: runID(3)}, []int{2, 1}},
			{store.ListParams{Before: runID(4), Job: "a"}, []int{3, 1}},
			{store.ListParams{Before: runID(1)}, nil},
			{store.ListParams{Queue: "none"}, nil},
		} {
			runs, err := s.RunList(t.Context(), c.p)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, n := range c.want {
				want = append(want, runID(n))
			}
			if got := ids(runs); !slices.Equal(got, want) {
				t.Errorf("RunList(%+v) = %v, want %v", c.p, got, want)
			}
		}
	}},

	{"QueueStats", func(t *testing.T, s store.Store) {
		// q1: the oldest-ready run is claimed (running), so OldestReady is the next one.
		create(t, s, inQueue(1, "q1", 1*time.Millisecond), inQueue(2, "q1", 5*time.Millisecond),
			inQueue(3, "q1", 3*time.Millisecond))
		claimOne(t, s, claimParams("w", 1, "q1"))
		// q2: one running run, nothing ready.
		create(t, s, inQueue(4, "q2", 0))
		claimOne(t, s, claimParams("w", 1, "q2"))
		// q3: delayed and completed.
		d := runParams(5)
		d.Run.Queue, d.Run.State = "q3", store.StateDelayed
		d.Timer = &store.Timer{Key: "delay", DueAt: sleepUntil}
		create(t, s, d, inQueue(6, "q3", 0))
		c := claimOne(t, s, claimParams("w", 1, "q3"))
		applyOK(t, s, mutation(c, store.Transition{State: store.StateCompleted}))

		want := map[string]store.QueueStats{
			"q1": {Counts: map[store.State]int{store.StateReady: 2, store.StateRunning: 1}, OldestReady: at(3 * time.Millisecond)},
			"q2": {Counts: map[store.State]int{store.StateRunning: 1}},
			"q3": {Counts: map[store.State]int{store.StateDelayed: 1, store.StateCompleted: 1}},
		}
		stats, err := s.QueueStats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]store.QueueStats{}
		for _, q := range stats {
			if _, dup := got[q.Queue]; dup {
				t.Errorf("queue %s listed twice", q.Queue)
			}
			got[q.Queue] = q
		}
		if len(got) != len(want) {
			t.Errorf("QueueStats lists %d queues, want %d: %+v", len(got), len(want), stats)
		}
		for name, w := range want {
			g := got[name]
			for _, st := range store.States {
				if g.Counts[st] != w.Counts[st] {
					t.Errorf("%s: %d %s, want %d", name, g.Counts[st], st, w.Counts[st])
				}
			}
			wantTime(t, name+" OldestReady", g.OldestReady, w.OldestReady)
		}
	}},
}

var slotTests = []test{
	{"AtMostLimitHolders", func(t *testing.T, s store.Store) {
		acquire := func(key, holder string, want bool) {
			t.Helper()
			ok, err := s.SlotAcquire(t.Context(), store.SlotParams{Key: key, Limit: 2, Holder: holder,
				Now: at(0), Until: at(time.Minute)})
			if err != nil || ok != want {
				t.Errorf("SlotAcquire(%s, %s) = %v, %v; want %v", key, holder, ok, err, want)
			}
		}
		acquire("k", "h1", true)
		acquire("k", "h2", true)
		acquire("k", "h3", false)
		acquire("other", "h3", true) // keys are independent
		if err := s.SlotRelease(t.Context(), "k", "h1"); err != nil {
			t.Fatal(err)
		}
		acquire("k", "h3", true)
		acquire("k", "h1", false)
		if err := s.SlotRelease(t.Context(), "k", "nobody"); err != nil {
			t.Errorf("releasing a slot not held: %v", err)
		}
	}},

	{"ExpiredSlotsDoNotCount", func(t *testing.T, s store.Store) {
		acquire := func(holder string, now, until time.Time) bool {
			t.Helper()
			ok, err := s.SlotAcquire(t.Context(), store.SlotParams{Key: "k", Limit: 1, Holder: holder, Now: now, Until: until})
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !acquire("h1", at(0), at(time.Minute)) {
			t.Fatal("first acquire refused")
		}
		if acquire("h2", at(30*time.Second), at(2*time.Minute)) {
			t.Error("acquired a slot held by an unexpired holder")
		}
		if !acquire("h2", at(2*time.Minute), at(3*time.Minute)) {
			t.Error("refused a slot whose holder expired")
		}
		// h1's slot lapsed and h2 took it: h1 cannot renew what it lost.
		if acquire("h1", at(2*time.Minute), at(4*time.Minute)) {
			t.Error("a lapsed holder renewed a slot another holder took")
		}
	}},

	{"ReacquireRenews", func(t *testing.T, s store.Store) {
		acquire := func(holder string, now, until time.Time) bool {
			t.Helper()
			ok, err := s.SlotAcquire(t.Context(), store.SlotParams{Key: "k", Limit: 1, Holder: holder, Now: now, Until: until})
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !acquire("h1", at(0), at(time.Minute)) {
			t.Fatal("first acquire refused")
		}
		if !acquire("h1", at(30*time.Second), at(5*time.Minute)) {
			t.Fatal("the holder's renewal was refused: it holds the slot")
		}
		// Past the first Until but within the renewed one, the slot is still h1's.
		if acquire("h2", at(2*time.Minute), at(3*time.Minute)) {
			t.Error("acquired a slot whose holder renewed it")
		}
		if !acquire("h2", at(6*time.Minute), at(7*time.Minute)) {
			t.Error("refused a slot after the renewal expired")
		}
	}},
}
