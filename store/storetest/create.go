package storetest

import (
	"bytes"
	"sync"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

var createTests = []test{
	{"CreatesWithRunStartedAtSeq1", func(t *testing.T, s store.Store) {
		p := runParams(1)
		res := create(t, s, p)[0]
		if res.Deduped {
			t.Fatal("a new run came back Deduped")
		}
		for what, r := range map[string]store.Run{"result": res.Run, "RunGet": get(t, s, p.Run.ID)} {
			if r.ID != p.Run.ID || r.Job != "job" || r.Queue != "q1" || r.Key != "key-1" ||
				r.Tenant != "tenant" || r.State != store.StateReady || r.Attempt != 1 ||
				!bytes.Equal(r.Input, p.Run.Input) {
				t.Errorf("%s: %+v does not hold what was created", what, r)
			}
			if r.LastSeq != 1 || r.Fence != 0 || r.WorkerID != "" {
				t.Errorf("%s: LastSeq %d, Fence %d, WorkerID %q; want 1, 0, \"\"", what, r.LastSeq, r.Fence, r.WorkerID)
			}
			wantTime(t, what+" ReadyAt", r.ReadyAt, p.Run.ReadyAt)
			wantTime(t, what+" CreatedAt", r.CreatedAt, p.Run.CreatedAt)
		}
		evs := events(t, s, p.Run.ID)
		wantKinds(t, "history", evs, history.KindRunStarted)
		if len(evs) == 1 && !bytes.Equal(evs[0].Data, p.Started.Data) {
			t.Error("RunStarted's data was not kept")
		}
	}},

	{"DelayedRunWaitsForItsTimer", func(t *testing.T, s store.Store) {
		r := inState(t, s, 1, store.StateDelayed)
		if r.State != store.StateDelayed {
			t.Fatalf("created %s, want delayed", r.State)
		}
		if due, ok := timerNext(t, s); !ok || !due.Equal(sleepUntil) {
			t.Errorf("TimerNext = %v, %v; want the delay's timer %v", due, ok, sleepUntil)
		}
		if got := claim(t, s, claimParams("w", 10, r.Queue)); len(got) != 0 {
			t.Errorf("claimed a delayed run: %v", ids(got))
		}
		if w := fire(t, s, sleepUntil, 10); len(w) != 1 || w[0].RunID != r.ID {
			t.Fatalf("TimerFire woke %v, want [%s]", wokenIDs(w), r.ID)
		}
		p := claimParams("w", 10, r.Queue)
		p.Now, p.StickyBefore = sleepUntil, sleepUntil
		if got := claim(t, s, p); len(got) != 1 {
			t.Errorf("the woken delayed run was not claimable: %v", ids(got))
		}
	}},

	{"DedupesOntoLiveRun", func(t *testing.T, s store.Store) {
		for i, st := range []store.State{store.StateReady, store.StateDelayed, store.StateRunning, store.StateSuspended} {
			t.Run(string(st), func(t *testing.T) {
				n := 10 * (i + 1)
				orig := inState(t, s, n, st)
				before := len(events(t, s, orig.ID))
				again := runParams(n + 1)
				again.Run.Key = orig.Key
				res := create(t, s, again)[0]
				if !res.Deduped || res.Run.ID != orig.ID {
					t.Fatalf("create over a %s run: Deduped %v, run %s; want true, %s", st, res.Deduped, res.Run.ID, orig.ID)
				}
				if res.Run.State != st {
					t.Errorf("Deduped run is %s, want the live run's state %s", res.Run.State, st)
				}
				if _, err := s.RunGet(t.Context(), again.Run.ID); jobs.CodeOf(err) != jobs.CodeRunNotFound {
					t.Errorf("the deduped run was written: RunGet = %v", err)
				}
				if after := len(events(t, s, orig.ID)); after != before {
					t.Errorf("dedupe appended to the live run: %d events, was %d", after, before)
				}
			})
		}
	}},

	{"FinishedOrBlockedRunFreesItsKey", func(t *testing.T, s store.Store) {
		for i, st := range []store.State{store.StateCompleted, store.StateFailed, store.StateCancelled, store.StateBlocked} {
			t.Run(string(st), func(t *testing.T) {
				n := 10 * (i + 1)
				orig := inState(t, s, n, st)
				again := runParams(n + 1)
				again.Run.Key = orig.Key
				res := create(t, s, again)[0]
				if res.Deduped || res.Run.ID != again.Run.ID {
					t.Errorf("create over a %s run: Deduped %v, run %s; want a new run %s", st, res.Deduped, res.Run.ID, again.Run.ID)
				}
				// The new run now holds the key.
				third := runParams(n + 2)
				third.Run.Key = orig.Key
				if res := create(t, s, third)[0]; !res.Deduped || res.Run.ID != again.Run.ID {
					t.Errorf("a third create: Deduped %v onto %s; want onto the new run %s", res.Deduped, res.Run.ID, again.Run.ID)
				}
			})
		}
	}},

	{"SameKeyOtherJobIsNotADuplicate", func(t *testing.T, s store.Store) {
		a := runParams(1)
		b := runParams(2)
		b.Run.Key = a.Run.Key
		b.Run.Job = "other-job"
		res := create(t, s, a, b)
		if res[0].Deduped || res[1].Deduped {
			t.Errorf("Deduped = %v, %v; the key is per job", res[0].Deduped, res[1].Deduped)
		}
	}},

	// A live run holds its (job, tenant, key) (store.LiveKey): two tenants, and no tenant, each
	// hold one live run under the same (job, key) at once, each tenant's next create is deduped
	// onto its own run only, and one tenant's run finishing frees that tenant's key alone.
	{"KeyIsHeldPerTenant", func(t *testing.T, s store.Store) {
		res := create(t, s, tenantRun(1, "shared", "a"), tenantRun(2, "shared", "b"), tenantRun(3, "shared", ""))
		wantRuns(t, "first creates", res, []int{1, 2, 3}, []bool{true, true, true}, []string{"a", "b", ""})
		res = create(t, s, tenantRun(4, "shared", "b"), tenantRun(5, "shared", ""), tenantRun(6, "shared", "a"))
		wantRuns(t, "second creates", res, []int{2, 3, 1}, []bool{false, false, false}, []string{"b", "", "a"})
		cancel(t, s, runID(2), appliedAt)
		res = create(t, s, tenantRun(7, "shared", "a"), tenantRun(8, "shared", "b"), tenantRun(9, "shared", ""))
		wantRuns(t, "after b's run ended", res, []int{1, 8, 3}, []bool{false, true, false}, []string{"a", "b", ""})
		for _, n := range []int{4, 5, 6, 7, 9} {
			if _, err := s.RunGet(t.Context(), runID(n)); jobs.CodeOf(err) != jobs.CodeRunNotFound {
				t.Errorf("deduped run %s was written: RunGet = %v", runID(n), err)
			}
		}
	}},

	// Within one call too: the same (job, key) for two tenants is two runs, and each tenant's
	// second item is deduped onto its own tenant's first.
	{"KeyIsHeldPerTenantWithinOneCall", func(t *testing.T, s store.Store) {
		res := create(t, s, tenantRun(1, "k", "a"), tenantRun(2, "k", "b"), tenantRun(3, "k", "b"),
			tenantRun(4, "k", "a"), tenantRun(5, "k", ""), tenantRun(6, "k", ""))
		wantRuns(t, "one call", res, []int{1, 2, 2, 1, 5, 5}, []bool{true, true, false, false, true, false},
			[]string{"a", "b", "b", "a", "", ""})
	}},

	{"DedupesWithinOneCall", func(t *testing.T, s store.Store) {
		a, b, c := runParams(1), runParams(2), runParams(3)
		b.Run.Key = a.Run.Key
		res := create(t, s, a, b, c)
		if res[0].Deduped || !res[1].Deduped || res[1].Run.ID != a.Run.ID || res[2].Deduped {
			t.Errorf("results %+v: want the second deduped onto the first and the third created", res)
		}
		if _, err := s.RunGet(t.Context(), b.Run.ID); jobs.CodeOf(err) != jobs.CodeRunNotFound {
			t.Errorf("the deduped run was written: RunGet = %v", err)
		}
	}},

	{"OneTransaction", func(t *testing.T, s store.Store) {
		// The second run reuses the id of a finished run (so it is not a dedupe): the call fails
		// and the first run of the call must not have been written either.
		taken := inState(t, s, 1, store.StateCompleted)
		fresh := runParams(2)
		clash := runParams(3)
		clash.Run.ID = taken.ID
		if _, err := s.RunCreate(t.Context(), []store.CreateRunParams{fresh, clash}); err == nil {
			t.Fatal("RunCreate with a taken run id succeeded")
		}
		if _, err := s.RunGet(t.Context(), fresh.Run.ID); jobs.CodeOf(err) != jobs.CodeRunNotFound {
			t.Errorf("a run of the failed call was written: RunGet = %v", err)
		}
	}},

	{"ConcurrentCreatesOfOneKeyCreateOneRun", func(t *testing.T, s store.Store) {
		const n = 16
		results := make([]store.CreateRunResult, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				p := runParams(100 + i)
				p.Run.Key = "same"
				res, err := s.RunCreate(t.Context(), []store.CreateRunParams{p})
				if err != nil || len(res) != 1 {
					t.Errorf("RunCreate: %v, %d results", err, len(res))
					return
				}
				results[i] = res[0]
			})
		}
		wg.Wait()
		var created []string
		for _, r := range results {
			if !r.Deduped {
				created = append(created, r.Run.ID)
			}
		}
		if len(created) != 1 {
			t.Fatalf("%d runs created, want exactly 1: %v", len(created), created)
		}
		for i, r := range results {
			if r.Run.ID != created[0] {
				t.Errorf("create %d returned run %s, want the one created, %s", i, r.Run.ID, created[0])
			}
		}
		all, err := s.RunList(t.Context(), store.ListParams{Job: "job"})
		if err != nil || len(all) != 1 {
			t.Errorf("RunList: %d runs, %v; want 1", len(all), err)
		}
	}},

	{"ReturnsCopies", func(t *testing.T, s store.Store) {
		// A caller that scribbles on what it passed or got back must not change the store.
		p := runParams(1)
		res := create(t, s, p)[0]
		p.Run.Input[0] = 'X'
		res.Run.Input[1] = 'X'
		if got := get(t, s, p.Run.ID).Input; string(got) != "input-1" {
			t.Errorf("Input = %q after the caller's slices changed, want %q", got, "input-1")
		}
		evs := events(t, s, p.Run.ID)
		evs[0].Data[0] ^= 0xff
		if again := events(t, s, p.Run.ID); bytes.Equal(again[0].Data, evs[0].Data) {
			t.Error("HistoryRead returned the store's own event data")
		}
		r := claimOne(t, s, claimParams("w", 1, p.Run.Queue))
		ev := step("a")
		m := mutation(r, store.Transition{State: store.StateCompleted, Result: []byte("result")}, ev)
		out := applyOK(t, s, m)
		m.Result[0] = 'X'
		ev.Data[0] ^= 0xff
		out.Run.Result[1] = 'X'
		if got := get(t, s, r.ID).Result; string(got) != "result" {
			t.Errorf("Result = %q after the caller's slices changed, want %q", got, "result")
		}
		if got := events(t, s, r.ID)[1]; bytes.Equal(got.Data, ev.Data) {
			t.Error("the store kept the caller's event data slice")
		}
	}},
}
