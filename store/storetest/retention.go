package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// finishedAt makes run n finished in state st (completed, failed or cancelled) at now.
func finishedAt(t *testing.T, s store.Store, n int, st store.State, now time.Time) store.Run {
	t.Helper()
	if st == store.StateCancelled {
		create(t, s, runParams(n))
		return cancel(t, s, runID(n), now)
	}
	r := running(t, s, n)
	tr := store.Transition{State: st, Result: []byte("done")}
	if st == store.StateFailed {
		tr = store.Transition{State: st, ErrorCode: "X_BOOM", Error: "boom", StopReason: history.StopTerminal}
	}
	m := mutation(r, tr, step("a"))
	m.Now = now
	return applyOK(t, s, m).Run
}

// every finished state past its cut-off: a week of retention, swept a day later than needed.
func keepNone(cut time.Time) store.RetentionParams {
	return store.RetentionParams{CompletedBefore: cut, FailedBefore: cut, CancelledBefore: cut}
}

func candidates(t *testing.T, s store.Store, p store.RetentionParams) []string {
	t.Helper()
	runs, err := s.RetentionCandidates(t.Context(), p)
	if err != nil {
		t.Fatalf("RetentionCandidates: %v", err)
	}
	return ids(runs)
}

func sweep(t *testing.T, s store.Store, p store.RetentionParams, ids ...string) store.RetentionDeleted {
	t.Helper()
	res, err := s.RetentionDelete(t.Context(), p, ids)
	if err != nil {
		t.Fatalf("RetentionDelete: %v", err)
	}
	return res
}

func wantGone(t *testing.T, s store.Store, id string) {
	t.Helper()
	_, err := s.RunGet(t.Context(), id)
	wantCode(t, "RunGet of a deleted run", err, jobs.CodeRunNotFound)
	_, err = s.HistoryRead(t.Context(), id, 0, 0)
	wantCode(t, "HistoryRead of a deleted run", err, jobs.CodeRunNotFound)
}

var retentionTests = []test{
	// Only finished runs past their cut-off are listed, oldest finish first; live and blocked
	// runs never are, whatever the cut-offs.
	{"OnlyFinishedRunsPastTheCutOff", func(t *testing.T, s store.Store) {
		for i, st := range store.States {
			if !st.Finished() {
				inState(t, s, i+1, st)
			}
		}
		finishedAt(t, s, 11, store.StateCompleted, at(3*time.Hour))
		finishedAt(t, s, 12, store.StateFailed, at(time.Hour))
		finishedAt(t, s, 13, store.StateCancelled, at(2*time.Hour))
		finishedAt(t, s, 14, store.StateCompleted, at(5*time.Hour)) // too recent
		got := candidates(t, s, keepNone(at(4*time.Hour)))
		if want := []string{runID(12), runID(13), runID(11)}; !slices.Equal(got, want) {
			t.Fatalf("candidates %v, want %v (oldest finish first, none live, none recent)", got, want)
		}
		// A run finished exactly at the cut-off is kept: "older than" is strict.
		if got := candidates(t, s, keepNone(at(time.Hour))); len(got) != 0 {
			t.Errorf("cut-off at the finish: candidates %v, want none", got)
		}
		// Even a cut-off in the far future lists no live or blocked run.
		all := candidates(t, s, keepNone(at(1000*time.Hour)))
		for _, id := range all {
			if r := get(t, s, id); !r.State.Finished() {
				t.Errorf("candidate %s is %s", id, r.State)
			}
		}
		if len(all) != 4 {
			t.Errorf("far cut-off: %d candidates, want the 4 finished runs", len(all))
		}
	}},

	// Each finished state has its own cut-off; a zero one keeps the state (dead letters an
	// operator may still retry).
	{"PerStateCutOffs", func(t *testing.T, s store.Store) {
		states := map[int]store.State{1: store.StateCompleted, 2: store.StateFailed, 3: store.StateCancelled}
		for n, st := range states {
			finishedAt(t, s, n, st, at(time.Hour))
		}
		cut := at(2 * time.Hour)
		for _, c := range []struct {
			p    store.RetentionParams
			want []string
		}{
			{store.RetentionParams{CompletedBefore: cut}, []string{runID(1)}},
			{store.RetentionParams{FailedBefore: cut}, []string{runID(2)}},
			{store.RetentionParams{CancelledBefore: cut}, []string{runID(3)}},
			{store.RetentionParams{CompletedBefore: cut, CancelledBefore: cut, FailedBefore: at(time.Minute)}, []string{runID(1), runID(3)}},
			{store.RetentionParams{}, nil},
		} {
			if got := candidates(t, s, c.p); !slices.Equal(got, c.want) {
				t.Errorf("%+v: candidates %v, want %v", c.p, got, c.want)
			}
			// Delete is held to the same rule as the listing: ids outside it are ignored.
			p := c.p
			p.Limit = 10
			if res := sweep(t, s, p, runID(1), runID(2), runID(3)); len(res.Runs) != len(c.want) {
				t.Errorf("%+v: deleted %v, want %v", c.p, res.Runs, c.want)
			}
			for _, id := range c.want {
				wantGone(t, s, id)
			}
			// Put the deleted ones back for the next case.
			for n, st := range states {
				if slices.Contains(c.want, runID(n)) {
					finishedAt(t, s, n, st, at(time.Hour))
				}
			}
		}
	}},

	// A delete removes the run and all that is its own; the other runs, the queue counts and the
	// backfill ledger stay as they were.
	{"DeleteRemovesTheRunAndItsHistory", func(t *testing.T, s store.Store) {
		finishedAt(t, s, 1, store.StateCompleted, at(time.Hour))
		keep := finishedAt(t, s, 2, store.StateCompleted, at(3*time.Hour))
		live := inState(t, s, 3, store.StateSuspended)
		openPass(t, s, pass(1, "reindex"))
		res := sweep(t, s, keepNone(at(2*time.Hour)), runID(1), runID(2), runID(3), runID(99))
		if !slices.Equal(res.Runs, []string{runID(1)}) {
			t.Fatalf("deleted %v, want only run 1", res.Runs)
		}
		if res.Events != 2 { // RunStarted and the step
			t.Errorf("deleted %d events, want 2", res.Events)
		}
		wantGone(t, s, runID(1))
		if got := events(t, s, keep.ID); len(got) != 2 {
			t.Errorf("run 2 has %d events after the sweep, want 2", len(got))
		}
		wantState(t, s, live.ID, store.StateSuspended)
		if due, ok := timerNext(t, s); !ok || !due.Equal(sleepUntil) {
			t.Errorf("the live run's timer: %v %v, want due at %v", due, ok, sleepUntil)
		}
		stats, err := s.QueueStats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range stats {
			if q.Queue == runParams(1).Run.Queue && q.Counts[store.StateCompleted] != 0 {
				t.Errorf("queue %s still counts %d completed runs", q.Queue, q.Counts[store.StateCompleted])
			}
		}
		if row := ledgerRow(t, s, runID(1)); row.Name != "reindex" {
			t.Errorf("ledger row after the sweep: %+v", row)
		}
		// A second sweep of the same ids deletes nothing.
		if res := sweep(t, s, keepNone(at(2*time.Hour)), runID(1)); len(res.Runs) != 0 {
			t.Errorf("second delete: %v", res.Runs)
		}
	}},

	// A run a dedupe id inside its window names is kept: a resend must get it back. Once the id
	// is past its window the run goes, and the id with it, so a resend creates a new run rather
	// than finding an id that names nothing.
	{"DedupeWindowKeepsItsRun", func(t *testing.T, s store.Store) {
		p := runParams(1)
		once(t, s, "outbox:1", p)
		r := claimOne(t, s, claimParams(stickyOwner, 1, p.Run.Queue))
		m := mutation(r, store.Transition{State: store.StateCompleted, Result: []byte("done")})
		m.Now = at(time.Hour)
		applyOK(t, s, m)
		inWindow := keepNone(at(2 * time.Hour))
		inWindow.DedupeFrom = p.Run.CreatedAt // the id was recorded at CreatedAt: still inside
		if got := candidates(t, s, inWindow); len(got) != 0 {
			t.Fatalf("candidates %v: the dedupe id's run must be kept", got)
		}
		if res := sweep(t, s, inWindow, runID(1)); len(res.Runs) != 0 {
			t.Fatalf("deleted %v inside the dedupe window", res.Runs)
		}
		past := inWindow
		past.DedupeFrom = p.Run.CreatedAt.Add(time.Millisecond)
		if got := candidates(t, s, past); !slices.Equal(got, []string{runID(1)}) {
			t.Fatalf("past the window: candidates %v, want run 1", got)
		}
		sweep(t, s, past, runID(1))
		wantGone(t, s, runID(1))
		again := runParams(2)
		if res := once(t, s, "outbox:1", again); res.Deduped || res.Run.ID != runID(2) {
			t.Errorf("resend after the sweep: %s deduped %v, want a new run 2", res.Run.ID, res.Deduped)
		}
	}},

	// Listed, then retried by an operator before the delete: the delete checks again and keeps it.
	{"RetriedSinceListedIsKept", func(t *testing.T, s store.Store) {
		finishedAt(t, s, 1, store.StateFailed, at(time.Hour))
		p := keepNone(at(2 * time.Hour))
		if got := candidates(t, s, p); !slices.Equal(got, []string{runID(1)}) {
			t.Fatalf("candidates %v", got)
		}
		if _, err := s.RunRetry(t.Context(), store.RetryParams{RunID: runID(1), Event: retried(at(90 * time.Minute)), Now: at(90 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if res := sweep(t, s, p, runID(1)); len(res.Runs) != 0 {
			t.Fatalf("deleted %v: a run retried since it was listed is live", res.Runs)
		}
		wantState(t, s, runID(1), store.StateReady)
	}},

	// A finished child whose parent has not finished is kept: the parent may still wait for it,
	// and a child that finished long ago is answered from its row. Once the parent finished, the
	// child goes like any run.
	{"ChildOfALiveParentIsKept", func(t *testing.T, s store.Store) {
		parent := inState(t, s, 1, store.StateSuspended)
		finishedAt(t, s, 2, store.StateCompleted, at(time.Hour))
		link(t, s, store.ChildLink{ParentID: parent.ID, ChildID: runID(2), Name: "kid", CreatedAt: at(0)})
		finishedAt(t, s, 3, store.StateCompleted, at(time.Hour)) // no parent
		p := keepNone(at(2 * time.Hour))
		if got := candidates(t, s, p); !slices.Equal(got, []string{runID(3)}) {
			t.Fatalf("candidates %v, want only the run without a parent", got)
		}
		if res := sweep(t, s, p, runID(2), runID(3)); !slices.Equal(res.Runs, []string{runID(3)}) {
			t.Fatalf("deleted %v, want only run 3: the live parent's child is kept", res.Runs)
		}
		wantState(t, s, runID(2), store.StateCompleted)
		// The parent finishes: its child is eligible again.
		cancel(t, s, parent.ID, at(time.Hour))
		if got := candidates(t, s, p); !slices.Contains(got, runID(2)) {
			t.Fatalf("after the parent finished: candidates %v, want the child among them", got)
		}
	}},

	// Limit bounds a batch, both the listing and the delete.
	{"LimitBoundsABatch", func(t *testing.T, s store.Store) {
		var all []string
		for n := 1; n <= 5; n++ {
			finishedAt(t, s, n, store.StateCompleted, at(time.Duration(n)*time.Minute))
			all = append(all, runID(n))
		}
		p := keepNone(at(time.Hour))
		p.Limit = 2
		if got := candidates(t, s, p); !slices.Equal(got, all[:2]) {
			t.Fatalf("candidates %v, want %v", got, all[:2])
		}
		if res := sweep(t, s, p, all...); len(res.Runs) > 2 {
			t.Fatalf("deleted %d runs with limit 2", len(res.Runs))
		}
		p.Limit = 0
		if got := candidates(t, s, p); len(got) != 3 {
			t.Errorf("left %v, want 3 runs", got)
		}
	}},

	// A run that received a published event: its delivery goes with it, and the event stays for
	// the runs still waiting.
	{"DeliveriesGoWithTheirRun", func(t *testing.T, s store.Store) {
		r := running(t, s, 1)
		fields := map[string]any{"order": 7}
		publish(t, s, event(t, 1, "paid", fields, appliedAt))
		res := applyOK(t, s, mutation(r, waitFor(t, "paid", fields, base), waitStarted("paid")))
		if res.Run.State != store.StateRunning {
			t.Fatalf("the lookback should have delivered at once; run is %s", res.Run.State)
		}
		m := mutation(res.Run, store.Transition{State: store.StateCompleted, Result: []byte("ok")})
		m.Now = at(time.Hour)
		applyOK(t, s, m)
		if got := sweep(t, s, keepNone(at(2*time.Hour)), runID(1)); len(got.Runs) != 1 {
			t.Fatalf("deleted %v", got.Runs)
		}
		wantGone(t, s, runID(1))
		// Another run can still take the event from the lookback window.
		r2 := running(t, s, 2)
		res2 := applyOK(t, s, mutation(r2, waitFor(t, "paid", fields, base), waitStarted("paid")))
		if len(received(t, res2.Appended)) != 1 {
			t.Errorf("run 2 did not receive the kept event: %v", kinds(res2.Appended))
		}
	}},
}
