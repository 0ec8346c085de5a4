package storetest

import (
	"testing"

	"github.com/ultimat3/jobs/store"
)

// A run's trace context is written at create and read back by every read of the row: the claim
// (the worker's task carries it), RunGet and RunList (the run views show it). Nothing after the
// create changes it.
const (
	traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceState  = "vendor=opaque,other=1"
)

func tracedParams(n int) store.CreateRunParams {
	p := runParams(n)
	p.Run.TraceParent, p.Run.TraceState = traceParent, traceState
	return p
}

func wantTrace(t *testing.T, what string, r store.Run, parent, state string) {
	t.Helper()
	if r.TraceParent != parent || r.TraceState != state {
		t.Errorf("%s: trace (%q, %q), want (%q, %q)", what, r.TraceParent, r.TraceState, parent, state)
	}
}

var traceTests = []test{
	{"KeptFromCreateToFinish", func(t *testing.T, s store.Store) {
		res, err := s.RunCreate(t.Context(), []store.CreateRunParams{tracedParams(1), runParams(2)})
		if err != nil {
			t.Fatal(err)
		}
		wantTrace(t, "create result", res[0].Run, traceParent, traceState)
		wantTrace(t, "untraced create result", res[1].Run, "", "")
		got, err := s.RunGet(t.Context(), runID(1))
		if err != nil {
			t.Fatal(err)
		}
		wantTrace(t, "RunGet", got, traceParent, traceState)
		list, err := s.RunList(t.Context(), store.ListParams{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list {
			if r.ID == runID(1) {
				wantTrace(t, "RunList", r, traceParent, traceState)
			} else {
				wantTrace(t, "RunList untraced", r, "", "")
			}
		}
		claimed, err := s.RunClaim(t.Context(), claimParams(stickyOwner, 2, got.Queue))
		if err != nil {
			t.Fatal(err)
		}
		seen := false
		for _, r := range claimed {
			if r.ID == runID(1) {
				seen = true
				wantTrace(t, "RunClaim", r, traceParent, traceState)
				res := applyOK(t, s, mutation(r, store.Transition{State: store.StateCompleted, Result: []byte("ok")}))
				wantTrace(t, "RunApply result", res.Run, traceParent, traceState)
			}
		}
		if !seen {
			t.Fatalf("run 1 was not claimed: %+v", claimed)
		}
		got, err = s.RunGet(t.Context(), runID(1))
		if err != nil {
			t.Fatal(err)
		}
		wantTrace(t, "RunGet after completion", got, traceParent, traceState)
	}},

	// A deduped create returns the live run as it was created: the second enqueuer's trace does
	// not replace the first's.
	{"DedupedCreateKeepsTheFirst", func(t *testing.T, s store.Store) {
		first := tracedParams(1)
		if _, err := s.RunCreate(t.Context(), []store.CreateRunParams{first}); err != nil {
			t.Fatal(err)
		}
		again := runParams(2)
		again.Run.Job, again.Run.Key = first.Run.Job, first.Run.Key
		again.Run.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		res, err := s.RunCreate(t.Context(), []store.CreateRunParams{again})
		if err != nil {
			t.Fatal(err)
		}
		if !res[0].Deduped {
			t.Fatalf("second create not deduped: %+v", res[0])
		}
		wantTrace(t, "deduped result", res[0].Run, traceParent, traceState)
	}},

	{"CreateOnce", func(t *testing.T, s store.Store) {
		res, err := s.RunCreateOnce(t.Context(), store.OnceParams{ID: "outbox:t", Create: tracedParams(1)})
		if err != nil {
			t.Fatal(err)
		}
		wantTrace(t, "RunCreateOnce", res.Run, traceParent, traceState)
		got, err := s.RunGet(t.Context(), runID(1))
		if err != nil {
			t.Fatal(err)
		}
		wantTrace(t, "RunGet", got, traceParent, traceState)
	}},
}
