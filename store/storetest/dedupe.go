package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

func once(t *testing.T, s store.Store, id string, p store.CreateRunParams) store.CreateRunResult {
	t.Helper()
	res, err := s.RunCreateOnce(t.Context(), store.OnceParams{ID: id, Create: p})
	if err != nil {
		t.Fatalf("RunCreateOnce(%s): %v", id, err)
	}
	return res
}

var dedupeTests = []test{
	{"CreatesAndRecords", func(t *testing.T, s store.Store) {
		res := once(t, s, "outbox:1", runParams(1))
		if res.Deduped || res.Run.ID != runID(1) || res.Run.State != store.StateReady {
			t.Fatalf("first create: %+v, want run 1 created ready", res)
		}
		wantKinds(t, "history", events(t, s, runID(1)), history.KindRunStarted)
	}},

	// The hole the id closes: the first run finished, so the key no longer dedupes, and a resend
	// of the same request must still not create a second run.
	{"DedupesAcrossTerminalStates", func(t *testing.T, s store.Store) {
		for i, st := range []store.State{store.StateCompleted, store.StateFailed, store.StateCancelled} {
			n := 10 * (i + 1)
			id := "outbox:" + string(st)
			p := runParams(n)
			if res := once(t, s, id, p); res.Deduped {
				t.Fatalf("%s: first create came back Deduped", st)
			}
			// Drive run n to the terminal state through the calls the engine makes.
			r := claimOne(t, s, claimParams(stickyOwner, 1, p.Run.Queue))
			switch st {
			case store.StateCancelled:
				cancel(t, s, r.ID, appliedAt)
			case store.StateCompleted:
				applyOK(t, s, mutation(r, store.Transition{State: st, Result: []byte("done")}))
			default:
				applyOK(t, s, mutation(r, store.Transition{State: st, ErrorCode: "X_BOOM", Error: "boom",
					StopReason: history.StopTerminal}))
			}
			again := runParams(n + 1) // a fresh run id, the same request
			again.Run.Job, again.Run.Key = p.Run.Job, p.Run.Key
			res := once(t, s, id, again)
			if !res.Deduped || res.Run.ID != runID(n) || res.Run.State != st {
				t.Errorf("%s: resend returned %s (%s, deduped %v), want run %s, deduped", st, res.Run.ID, res.Run.State, res.Deduped, runID(n))
			}
			if _, err := s.RunGet(t.Context(), runID(n+1)); err == nil {
				t.Errorf("%s: the resend created run %s", st, runID(n+1))
			}
		}
	}},

	// A new request for a key a live run holds gets that run, and its id then names that run.
	{"LiveKeyDedupesAndIsRecorded", func(t *testing.T, s store.Store) {
		create(t, s, runParams(1))
		p := runParams(2)
		p.Run.Key = "key-1"
		res := once(t, s, "outbox:x", p)
		if !res.Deduped || res.Run.ID != runID(1) {
			t.Fatalf("got %s deduped %v, want run 1 deduped", res.Run.ID, res.Deduped)
		}
		p3 := runParams(3)
		p3.Run.Key = "key-1"
		if res := once(t, s, "outbox:x", p3); res.Run.ID != runID(1) {
			t.Errorf("resend got %s, want run 1", res.Run.ID)
		}
	}},

	// A live run of another tenant under the same (job, key) does not hold the key: the
	// request creates its own tenant's run and its id names that run, so a resend gets it even
	// once the other tenant's run finished. A no-tenant request likewise, and a resend under a
	// new key of its own tenant's live run dedupes onto it.
	{"AnotherTenantsKeyIsNotTheRequests", func(t *testing.T, s store.Store) {
		create(t, s, tenantRun(1, "shared", "a"))
		res := once(t, s, "outbox:y", tenantRun(2, "shared", "other"))
		wantRuns(t, "another tenant's request", []store.CreateRunResult{res}, []int{2}, []bool{true}, []string{"other"})
		res = once(t, s, "outbox:z", tenantRun(3, "shared", ""))
		wantRuns(t, "a no-tenant request", []store.CreateRunResult{res}, []int{3}, []bool{true}, []string{""})
		res = once(t, s, "outbox:w", tenantRun(4, "shared", ""))
		wantRuns(t, "a second no-tenant request", []store.CreateRunResult{res}, []int{3}, []bool{false}, []string{""})
		cancel(t, s, runID(1), appliedAt)
		res = once(t, s, "outbox:y", tenantRun(5, "shared", "other"))
		wantRuns(t, "the resend", []store.CreateRunResult{res}, []int{2}, []bool{false}, []string{"other"})
	}},

	{"ConcurrentResendsCreateOneRun", func(t *testing.T, s store.Store) {
		const n = 8
		got := make([]store.CreateRunResult, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := runParams(100 + i)
				p.Run.Key = "same" // as a resend would carry
				got[i], errs[i] = s.RunCreateOnce(t.Context(), store.OnceParams{ID: "outbox:race", Create: p})
			}()
		}
		wg.Wait()
		created := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("caller %d: %v", i, errs[i])
			}
			if got[i].Run.ID != got[0].Run.ID {
				t.Errorf("caller %d got run %s, caller 0 got %s", i, got[i].Run.ID, got[0].Run.ID)
			}
			if !got[i].Deduped {
				created++
			}
		}
		if created != 1 {
			t.Errorf("%d callers created a run, want 1", created)
		}
	}},

	{"PruneForgetsOldIDs", func(t *testing.T, s store.Store) {
		p1, p2 := runParams(1), runParams(2) // created at base+1ms and base+2ms
		once(t, s, "old", p1)
		once(t, s, "new", p2)
		n, err := s.DedupePrune(t.Context(), at(2*time.Millisecond))
		if err != nil || n != 1 {
			t.Fatalf("DedupePrune = %d, %v; want 1", n, err)
		}
		cancel(t, s, runID(1), appliedAt) // frees key-1
		again := runParams(3)
		again.Run.Key = "key-1"
		if res := once(t, s, "old", again); res.Deduped || res.Run.ID != runID(3) {
			t.Errorf("after prune, a resend of a forgotten id got %s deduped %v; want a new run", res.Run.ID, res.Deduped)
		}
		cancel(t, s, runID(2), appliedAt)
		again = runParams(4)
		again.Run.Key = "key-2"
		if res := once(t, s, "new", again); !res.Deduped || res.Run.ID != runID(2) {
			t.Errorf("a kept id got %s deduped %v; want run 2", res.Run.ID, res.Deduped)
		}
	}},
}
