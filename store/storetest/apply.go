package storetest

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

var applyTests = []test{
	{"StepAppendsContiguousSeqsAndKeepsRunning", func(t *testing.T, s store.Store) {
		r := running(t, s, 1)
		res := apply(t, s,
			mutation(r, store.Transition{}, step("a"), step("b")),
			mutation(r, store.Transition{}, step("c")),
		)
		var seqs []int64
		for _, x := range res {
			if x.Err != nil {
				t.Fatal(x.Err)
			}
			for _, e := range x.Appended {
				seqs = append(seqs, e.Seq)
			}
		}
		res = append(res, applyOK(t, s, mutation(r, store.Transition{}, step("d"))))
		seqs = append(seqs, res[2].Appended[0].Seq)
		if want := []int64{2, 3, 4, 5}; !slices.Equal(seqs, want) {
			t.Errorf("appended seqs %v, want %v", seqs, want)
		}
		got := get(t, s, r.ID)
		if got.LastSeq != 5 || got.State != store.StateRunning || got.WorkerID != r.WorkerID || got.Fence != r.Fence {
			t.Errorf("after steps: %+v; want LastSeq 5, still running under the same claim", got)
		}
		wantTime(t, "LeaseUntil", got.LeaseUntil, r.LeaseUntil)
		wantTime(t, "UpdatedAt", got.UpdatedAt, appliedAt)
		if res[2].Run.LastSeq != 5 {
			t.Errorf("MutationResult.Run.LastSeq = %d, want 5", res[2].Run.LastSeq)
		}
		evs := events(t, s, r.ID)
		wantKinds(t, "history", evs, history.KindRunStarted, history.KindStepCompleted,
			history.KindStepCompleted, history.KindStepCompleted, history.KindStepCompleted)
		for i, name := range []string{"a", "b", "c", "d"} {
			if evs[i+1].Name != name {
				t.Errorf("event %d is %q, want %q", i+2, evs[i+1].Name, name)
			}
		}
	}},

	{"StaleFenceIsRefused", func(t *testing.T, s store.Store) {
		old := running(t, s, 1)
		lapsed := leaseUntil.Add(time.Second)
		if _, err := s.RunExpireLeases(t.Context(), lapsed, 10); err != nil {
			t.Fatal(err)
		}
		// Lapsed and handed back, not yet reclaimed: still refused.
		res := apply(t, s, mutation(old, store.Transition{}, step("late")))[0]
		wantCode(t, "write after the lease lapsed", res.Err, jobs.CodeJobLeaseLost)

		p := claimParams("w2", 1, old.Queue)
		p.Now, p.StickyBefore, p.LeaseUntil = lapsed, lapsed, lapsed.Add(time.Minute)
		cur := claimOne(t, s, p)
		res = apply(t, s, mutation(old, store.Transition{State: store.StateCompleted}, step("late")))[0]
		wantCode(t, "write with the old fence", res.Err, jobs.CodeJobLeaseLost)
		if len(res.Appended) != 0 {
			t.Errorf("a refused mutation appended %d events", len(res.Appended))
		}
		if got := get(t, s, old.ID); got.State != store.StateRunning || got.WorkerID != "w2" || got.LastSeq != 1 {
			t.Errorf("after a refused write: %+v; want running under w2 with only RunStarted", got)
		}
		applyOK(t, s, mutation(cur, store.Transition{}, step("now")))
	}},

	{"NotRunningIsLeaseLost", func(t *testing.T, s store.Store) {
		r := running(t, s, 1)
		suspend(t, s, r)
		res := apply(t, s, mutation(r, store.Transition{}, step("x")))[0]
		wantCode(t, "write to a suspended run", res.Err, jobs.CodeJobLeaseLost)
		if n := len(events(t, s, r.ID)); n != 1 {
			t.Errorf("history has %d events, want 1", n)
		}
	}},

	{"CancelledIsAborted", func(t *testing.T, s store.Store) {
		r := running(t, s, 1)
		cancel(t, s, r.ID, appliedAt)
		res := apply(t, s, mutation(r, store.Transition{State: store.StateCompleted}, step("x")))[0]
		wantCode(t, "write to a cancelled run", res.Err, jobs.CodeAborted)
		if got := wantState(t, s, r.ID, store.StateCancelled); got.LastSeq != 2 {
			t.Errorf("LastSeq %d, want 2 (RunStarted, RunCancelled)", got.LastSeq)
		}
	}},

	{"UnknownRunIsNotFound", func(t *testing.T, s store.Store) {
		res := apply(t, s, store.Mutation{RunID: runID(99), Fence: 1, Now: appliedAt, Events: []history.Event{step("x")}})[0]
		wantCode(t, "write to an unknown run", res.Err, jobs.CodeRunNotFound)
	}},

	{"RefusalDoesNotStopTheOthers", func(t *testing.T, s store.Store) {
		a := running(t, s, 1)
		b := running(t, s, 2)
		c := running(t, s, 3)
		cancel(t, s, b.ID, appliedAt)
		stale := a
		stale.Fence = a.Fence - 1
		res := apply(t, s,
			mutation(a, store.Transition{}, step("a")),
			mutation(b, store.Transition{}, step("b")),
			store.Mutation{RunID: runID(99), Fence: 1, Now: appliedAt},
			mutation(stale, store.Transition{}, step("stale")),
			mutation(c, store.Transition{State: store.StateCompleted}, step("c")),
		)
		if res[0].Err != nil || len(res[0].Appended) != 1 || res[0].Appended[0].Seq != 2 {
			t.Errorf("first mutation: %v, appended %v", res[0].Err, res[0].Appended)
		}
		wantCode(t, "second (cancelled)", res[1].Err, jobs.CodeAborted)
		wantCode(t, "third (unknown)", res[2].Err, jobs.CodeRunNotFound)
		wantCode(t, "fourth (stale fence)", res[3].Err, jobs.CodeJobLeaseLost)
		if res[4].Err != nil || res[4].Run.State != store.StateCompleted {
			t.Errorf("fifth mutation: %v, run %s; want completed", res[4].Err, res[4].Run.State)
		}
		wantKinds(t, "a", events(t, s, a.ID), history.KindRunStarted, history.KindStepCompleted)
		wantKinds(t, "c", events(t, s, c.ID), history.KindRunStarted, history.KindStepCompleted)
	}},

	{"SuspendArmsTimersAndKeepsStickyWorker", func(t *testing.T, s store.Store) {
		sticky := running(t, s, 1)
		plain := running(t, s, 2)
		res := applyOK(t, s, mutation(sticky, store.Transition{State: store.StateSuspended, Sticky: true,
			Timers: []store.Timer{{Key: "sleep", DueAt: sleepUntil, Fire: timerFired("sleep")}}},
			history.New(appliedAt, history.TimerStarted{TimerName: "sleep", WakeAt: sleepUntil})))
		if res.Run.State != store.StateSuspended || res.Run.WorkerID != stickyOwner {
			t.Errorf("sticky suspend: state %s, worker %q; want suspended, %s", res.Run.State, res.Run.WorkerID, stickyOwner)
		}
		res = applyOK(t, s, mutation(plain, store.Transition{State: store.StateSuspended,
			Timers: []store.Timer{{Key: "sleep", DueAt: sleepUntil.Add(time.Hour)}}}))
		if res.Run.WorkerID != "" {
			t.Errorf("non-sticky suspend kept worker %q", res.Run.WorkerID)
		}
		if got := get(t, s, plain.ID); got.WorkerID != "" || got.State != store.StateSuspended {
			t.Errorf("RunGet after a non-sticky suspend: %s, worker %q", got.State, got.WorkerID)
		}
		if due, ok := timerNext(t, s); !ok || !due.Equal(sleepUntil) {
			t.Errorf("TimerNext = %v, %v; want %v", due, ok, sleepUntil)
		}
		if got := claim(t, s, claimParams("w", 10, sticky.Queue, plain.Queue)); len(got) != 0 {
			t.Errorf("claimed suspended runs %v", ids(got))
		}
		woken := fire(t, s, sleepUntil, 10)
		if len(woken) != 1 || woken[0].RunID != sticky.ID {
			t.Errorf("at the first timer woke %v, want [%s]", wokenIDs(woken), sticky.ID)
		}
	}},

	{"CompleteSetsResultAndFinishedAt", func(t *testing.T, s store.Store) {
		r := running(t, s, 1)
		res := applyOK(t, s, mutation(r, store.Transition{State: store.StateCompleted, Result: []byte("42")},
			history.New(appliedAt, history.RunCompleted{Result: []byte("42")})))
		got := get(t, s, r.ID)
		for what, x := range map[string]store.Run{"result": res.Run, "RunGet": got} {
			if x.State != store.StateCompleted || !bytes.Equal(x.Result, []byte("42")) || x.WorkerID != "" {
				t.Errorf("%s: state %s, result %q, worker %q; want completed, 42, none", what, x.State, x.Result, x.WorkerID)
			}
			wantTime(t, what+" FinishedAt", x.FinishedAt, appliedAt)
			wantTime(t, what+" UpdatedAt", x.UpdatedAt, appliedAt)
		}
		wantKinds(t, "history", events(t, s, r.ID), history.KindRunStarted, history.KindRunCompleted)
		res = apply(t, s, mutation(r, store.Transition{}, step("after")))[0]
		wantCode(t, "write after completion", res.Err, jobs.CodeJobLeaseLost)
	}},

	{"FailSetsErrorAndFinishedAt", func(t *testing.T, s store.Store) {
		r := inState(t, s, 1, store.StateFailed)
		got := get(t, s, r.ID)
		if got.State != store.StateFailed || got.ErrorCode != "X_BOOM" || got.Error != "boom" ||
			got.StopReason != history.StopTerminal || got.WorkerID != "" {
			t.Errorf("failed run: %+v", got)
		}
		wantTime(t, "FinishedAt", got.FinishedAt, appliedAt)
	}},

	{"AttemptAndErrorFields", func(t *testing.T, s store.Store) {
		r := running(t, s, 1)
		// A failed attempt backs off: delayed with a timer, attempt 2, the error recorded.
		retryAt := at(10 * time.Minute)
		res := applyOK(t, s, mutation(r, store.Transition{State: store.StateDelayed, Attempt: 2,
			ErrorCode: "X_A", Error: "a", Timers: []store.Timer{{Key: "retry", DueAt: retryAt}}},
			history.New(appliedAt, history.AttemptFailed{Attempt: 1, Code: "X_A", Error: "a", RetryAt: retryAt})))
		if res.Run.State != store.StateDelayed || res.Run.Attempt != 2 || res.Run.ErrorCode != "X_A" ||
			res.Run.Error != "a" || res.Run.WorkerID != "" {
			t.Fatalf("after a failed attempt: %+v", res.Run)
		}
		if !res.Run.FinishedAt.IsZero() {
			t.Errorf("a delayed run has FinishedAt %v", res.Run.FinishedAt)
		}
		if w := fire(t, s, retryAt, 10); len(w) != 1 {
			t.Fatalf("the retry timer woke %v", wokenIDs(w))
		}
		p := claimParams("w", 1, r.Queue)
		p.Now, p.StickyBefore, p.LeaseUntil = retryAt, retryAt, retryAt.Add(time.Minute)
		r = claimOne(t, s, p)

		// Attempt 0 and no error fields keep what the run holds.
		res = applyOK(t, s, mutation(r, store.Transition{}, step("a")))
		if res.Run.Attempt != 2 || res.Run.ErrorCode != "X_A" || res.Run.Error != "a" {
			t.Errorf("a step changed attempt or error: %+v", res.Run)
		}
		// Any error field set replaces all three.
		res = applyOK(t, s, mutation(r, store.Transition{Error: "b"}))
		if res.Run.ErrorCode != "" || res.Run.Error != "b" || res.Run.StopReason != "" {
			t.Errorf("error fields (%q, %q, %q), want (\"\", \"b\", \"\")", res.Run.ErrorCode, res.Run.Error, res.Run.StopReason)
		}
		res = applyOK(t, s, mutation(r, store.Transition{StopReason: history.StopAttemptsExhausted}))
		if res.Run.Error != "" || res.Run.StopReason != history.StopAttemptsExhausted {
			t.Errorf("error fields (%q, %q, %q) after StopReason alone", res.Run.ErrorCode, res.Run.Error, res.Run.StopReason)
		}
		if got := get(t, s, r.ID); got.Attempt != 2 || got.Error != "" || got.StopReason != history.StopAttemptsExhausted {
			t.Errorf("RunGet: %+v", got)
		}
	}},

	{"HandBackMakesItReady", func(t *testing.T, s store.Store) {
		r := running(t, s, 1)
		readyAt := at(5 * time.Second)
		res := applyOK(t, s, mutation(r, store.Transition{State: store.StateReady, ReadyAt: readyAt, Sticky: true}))
		if res.Run.State != store.StateReady || res.Run.WorkerID != "" {
			t.Errorf("handed back: state %s, worker %q; want ready, none (Sticky is for suspensions only)", res.Run.State, res.Run.WorkerID)
		}
		wantTime(t, "ReadyAt", get(t, s, r.ID).ReadyAt, readyAt)
		if got := claimOne(t, s, claimParams("w2", 1, r.Queue)); got.Fence <= r.Fence {
			t.Errorf("reclaimed with fence %d, want above %d", got.Fence, r.Fence)
		}
	}},

	{"BlockedIsNotClaimable", func(t *testing.T, s store.Store) {
		r := inState(t, s, 1, store.StateBlocked)
		got := get(t, s, r.ID)
		if got.State != store.StateBlocked || got.ErrorCode != string(jobs.CodeReplayDiverged) || got.WorkerID != "" {
			t.Errorf("blocked run: %+v", got)
		}
		if c := claim(t, s, claimParams("w", 10, r.Queue)); len(c) != 0 {
			t.Errorf("claimed a blocked run: %v", ids(c))
		}
	}},
}
