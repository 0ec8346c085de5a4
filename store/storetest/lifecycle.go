package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// leased creates run n and claims it for w with a lease until until.
func leased(t *testing.T, s store.Store, n int, w string, until time.Time) store.Run {
	t.Helper()
	p := runParams(n)
	create(t, s, p)
	cp := claimParams(w, 1, p.Run.Queue)
	cp.LeaseUntil = until
	return claimOne(t, s, cp)
}

var leaseTests = []test{
	{"HeartbeatExtendsHeldLeasesOnly", func(t *testing.T, s store.Store) {
		// B: its lease lapsed and w2 reclaimed it, so w1's fence is stale.
		stale := leased(t, s, 2, "w1", at(time.Minute))
		if _, err := s.RunExpireLeases(t.Context(), at(time.Minute+time.Second), 10); err != nil {
			t.Fatal(err)
		}
		p := claimParams("w2", 1, stale.Queue)
		p.Now, p.StickyBefore, p.LeaseUntil = at(time.Minute+time.Second), at(time.Minute+time.Second), at(time.Hour)
		claimOne(t, s, p)

		held := leased(t, s, 1, "w1", at(time.Minute))
		gone := running(t, s, 3)
		cancel(t, s, gone.ID, appliedAt)
		parked := inState(t, s, 4, store.StateSuspended)

		errs, err := s.RunHeartbeat(t.Context(), store.HeartbeatParams{WorkerID: "w1", Now: at(30 * time.Second),
			LeaseUntil: at(10 * time.Minute), Leases: []store.Lease{
				{RunID: held.ID, Fence: held.Fence},
				{RunID: stale.ID, Fence: stale.Fence},
				{RunID: gone.ID, Fence: gone.Fence},
				{RunID: parked.ID, Fence: parked.Fence},
				{RunID: runID(99), Fence: 1},
			}})
		if err != nil || len(errs) != 5 {
			t.Fatalf("RunHeartbeat: %v, %d results; want 5", err, len(errs))
		}
		if errs[0] != nil {
			t.Errorf("held lease: %v", errs[0])
		}
		wantCode(t, "reclaimed lease", errs[1], jobs.CodeJobLeaseLost)
		wantCode(t, "cancelled run", errs[2], jobs.CodeAborted)
		wantCode(t, "suspended run", errs[3], jobs.CodeJobLeaseLost)
		wantCode(t, "unknown run", errs[4], jobs.CodeRunNotFound)

		wantTime(t, "held LeaseUntil", get(t, s, held.ID).LeaseUntil, at(10*time.Minute))
		wantTime(t, "reclaimed LeaseUntil", get(t, s, stale.ID).LeaseUntil, at(time.Hour))
		// Without the heartbeat this lease would have lapsed at one minute.
		if w, err := s.RunExpireLeases(t.Context(), at(5*time.Minute), 10); err != nil || len(w) != 0 {
			t.Errorf("RunExpireLeases(5m) = %v, %v; want nothing: the lease was extended", wokenIDs(w), err)
		}
	}},

	{"ExpireLeasesReadiesLapsedRuns", func(t *testing.T, s store.Store) {
		one := leased(t, s, 1, "w1", at(1*time.Minute))
		leased(t, s, 2, "w1", at(2*time.Minute))
		leased(t, s, 3, "w1", at(3*time.Minute))
		parked := inState(t, s, 4, store.StateSuspended)
		ready := inState(t, s, 5, store.StateReady)

		now := at(2 * time.Minute)
		w, err := s.RunExpireLeases(t.Context(), now, 10)
		if err != nil {
			t.Fatal(err)
		}
		// The lease ending exactly now has not lapsed before now.
		if !slices.Equal(wokenIDs(w), []string{one.ID}) || w[0].Queue != one.Queue {
			t.Fatalf("expired %+v, want only %s", w, one.ID)
		}
		got := wantState(t, s, one.ID, store.StateReady)
		if got.WorkerID != "" {
			t.Errorf("expired run kept worker %q", got.WorkerID)
		}
		wantTime(t, "ReadyAt", got.ReadyAt, now)
		if got.LastSeq != 1 {
			t.Errorf("expiring a lease appended events: LastSeq %d", got.LastSeq)
		}
		p := claimParams("w2", 1, one.Queue)
		p.Now, p.StickyBefore = now, now
		if r := claimOne(t, s, p); r.Fence <= one.Fence {
			t.Errorf("reclaimed with fence %d, want above %d", r.Fence, one.Fence)
		}

		later := at(10 * time.Minute)
		var all []string
		for _, limit := range []int{1, 10, 10} {
			w, err := s.RunExpireLeases(t.Context(), later, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(w) > limit {
				t.Errorf("RunExpireLeases(limit %d) expired %d", limit, len(w))
			}
			all = append(all, wokenIDs(w)...)
		}
		if want := []string{runID(1), runID(2), runID(3)}; !sameSet(all, want) {
			t.Errorf("then expired %v, want %v (run 1 again: its new lease lapsed too)", all, want)
		}
		wantState(t, s, parked.ID, store.StateSuspended)
		wantState(t, s, ready.ID, store.StateReady)
	}},
}

var cancelTests = []test{
	{"CancelsEveryLiveOrBlockedRun", func(t *testing.T, s store.Store) {
		m := map[string]any{"order": 1}
		runs := map[store.State]store.Run{
			store.StateReady:     inState(t, s, 1, store.StateReady),
			store.StateDelayed:   inState(t, s, 2, store.StateDelayed),
			store.StateRunning:   inState(t, s, 3, store.StateRunning),
			store.StateSuspended: waiting(t, s, 4, "paid", m, base),
			store.StateBlocked:   inState(t, s, 5, store.StateBlocked),
		}
		now := at(3 * time.Second)
		for st, r := range runs {
			before := len(events(t, s, r.ID))
			got, err := s.RunCancel(t.Context(), r.ID, cancelled(now), now)
			if err != nil {
				t.Errorf("cancel a %s run: %v", st, err)
				continue
			}
			for what, x := range map[string]store.Run{"result": got, "RunGet": get(t, s, r.ID)} {
				if x.State != store.StateCancelled || x.WorkerID != "" {
					t.Errorf("%s run, %s: %s with worker %q; want cancelled, none", st, what, x.State, x.WorkerID)
				}
				wantTime(t, string(st)+" "+what+" FinishedAt", x.FinishedAt, now)
			}
			evs := events(t, s, r.ID)
			if len(evs) != before+1 || evs[len(evs)-1].Kind != history.KindRunCancelled {
				t.Errorf("%s run: history %v, want RunCancelled appended", st, kinds(evs))
			}
			if c := claim(t, s, claimParams("w", 10, r.Queue)); len(c) != 0 {
				t.Errorf("claimed a cancelled run: %v", ids(c))
			}
		}
		// Its timers and waits are gone.
		if due, ok := timerNext(t, s); ok {
			t.Errorf("a cancelled run's timer is still armed, due %v", due)
		}
		if d := publish(t, s, event(t, 1, "paid", m, now)).Delivered; len(d) != 0 {
			t.Errorf("an event was delivered to cancelled runs %v", d)
		}
		// The worker that held the running one is refused.
		r := runs[store.StateRunning]
		res := apply(t, s, mutation(r, store.Transition{}, step("x")))[0]
		wantCode(t, "write after cancel", res.Err, jobs.CodeAborted)
		errs, err := s.RunHeartbeat(t.Context(), store.HeartbeatParams{WorkerID: r.WorkerID, Now: now,
			LeaseUntil: at(time.Hour), Leases: []store.Lease{{RunID: r.ID, Fence: r.Fence}}})
		if err != nil || len(errs) != 1 {
			t.Fatalf("RunHeartbeat: %v, %v", errs, err)
		}
		wantCode(t, "heartbeat after cancel", errs[0], jobs.CodeAborted)
	}},

	{"FinishedRunIsNotCancellable", func(t *testing.T, s store.Store) {
		for i, st := range []store.State{store.StateCompleted, store.StateFailed, store.StateCancelled} {
			r := inState(t, s, i+1, st)
			before := get(t, s, r.ID)
			_, err := s.RunCancel(t.Context(), r.ID, cancelled(at(time.Hour)), at(time.Hour))
			wantCode(t, "cancel a "+string(st)+" run", err, jobs.CodeJobNotCancellable)
			// Every store words it alike, so the CLI prints one message whatever the backend.
			if want := fmt.Sprintf("%s: run %s is already %s", jobs.CodeJobNotCancellable, r.ID, st); err.Error() != want {
				t.Errorf("cancel a %s run: %q, want %q", st, err.Error(), want)
			}
			after := get(t, s, r.ID)
			if after.State != st || after.LastSeq != before.LastSeq || !after.FinishedAt.Equal(before.FinishedAt) {
				t.Errorf("a refused cancel changed the %s run: %+v", st, after)
			}
		}
		_, err := s.RunCancel(t.Context(), runID(99), cancelled(appliedAt), appliedAt)
		wantCode(t, "cancel an unknown run", err, jobs.CodeRunNotFound)
	}},
}

func retried(now time.Time) history.Event {
	return history.New(now, history.RunRetried{By: "operator", Reason: "test"})
}

var retryTests = []test{
	{"ReopensFailedAndBlockedRuns", func(t *testing.T, s store.Store) {
		failed := running(t, s, 1)
		applyOK(t, s, mutation(failed, store.Transition{State: store.StateFailed, Attempt: 3,
			ErrorCode: "X_BOOM", Error: "boom", StopReason: history.StopAttemptsExhausted}))
		blocked := inState(t, s, 2, store.StateBlocked)
		now := at(time.Hour)
		for _, r := range []store.Run{failed, blocked} {
			before := len(events(t, s, r.ID))
			got, err := s.RunRetry(t.Context(), store.RetryParams{RunID: r.ID, Event: retried(now), Now: now})
			if err != nil {
				t.Errorf("retry %s: %v", r.ID, err)
				continue
			}
			// The count goes on (store.RetriedAttempt): the failed run's next pass is attempt 4;
			// the blocked one did not fail its attempt, so it carries on.
			wantAttempt := map[string]int{failed.ID: 4, blocked.ID: blocked.Attempt}[r.ID]
			for what, x := range map[string]store.Run{"result": got, "RunGet": get(t, s, r.ID)} {
				if x.State != store.StateReady || x.Attempt != wantAttempt || x.ErrorCode != "" || x.Error != "" ||
					x.StopReason != "" || x.WorkerID != "" || !x.FinishedAt.IsZero() {
					t.Errorf("retried %s, %s: %+v; want ready, attempt %d, no error, no worker, not finished", r.ID, what, x, wantAttempt)
				}
				wantTime(t, what+" ReadyAt", x.ReadyAt, now)
			}
			evs := events(t, s, r.ID)
			if len(evs) != before+1 || evs[len(evs)-1].Kind != history.KindRunRetried {
				t.Errorf("history %v, want RunRetried appended", kinds(evs))
			}
			p := claimParams("w", 1, r.Queue)
			p.Now, p.StickyBefore = now, now
			claimOne(t, s, p)
			// Live again, it holds its key again.
			again := runParams(10)
			again.Run.Key = r.Key
			if res := create(t, s, again)[0]; !res.Deduped || res.Run.ID != r.ID {
				t.Errorf("create with the retried run's key: Deduped %v onto %s, want onto %s", res.Deduped, res.Run.ID, r.ID)
			}
		}
	}},

	{"OtherStatesAreNotRetryable", func(t *testing.T, s store.Store) {
		for i, st := range []store.State{store.StateReady, store.StateDelayed, store.StateRunning,
			store.StateSuspended, store.StateCompleted, store.StateCancelled} {
			r := inState(t, s, i+1, st)
			before := get(t, s, r.ID)
			_, err := s.RunRetry(t.Context(), store.RetryParams{RunID: r.ID, Event: retried(at(time.Hour)), Now: at(time.Hour)})
			wantCode(t, "retry a "+string(st)+" run", err, jobs.CodeJobNotRetryable)
			if after := get(t, s, r.ID); after.State != st || after.LastSeq != before.LastSeq {
				t.Errorf("a refused retry changed the %s run: %+v", st, after)
			}
		}
		_, err := s.RunRetry(t.Context(), store.RetryParams{RunID: runID(99), Event: retried(appliedAt), Now: appliedAt})
		wantCode(t, "retry an unknown run", err, jobs.CodeRunNotFound)
	}},

	{"NotWhileANewRunHoldsItsKey", func(t *testing.T, s store.Store) {
		// A blocked run frees its key; a new run takes it. Reopening the blocked one would make
		// two live runs of one key (the Postgres unique index refuses it), so it is refused.
		blocked := inState(t, s, 1, store.StateBlocked)
		next := runParams(2)
		next.Run.Key = blocked.Key
		create(t, s, next)
		now := at(time.Hour)
		_, err := s.RunRetry(t.Context(), store.RetryParams{RunID: blocked.ID, Event: retried(now), Now: now})
		wantCode(t, "retry while the key is held", err, jobs.CodeJobNotRetryable)
		if got := get(t, s, blocked.ID); got.State != store.StateBlocked || got.LastSeq != blocked.LastSeq {
			t.Errorf("a refused retry changed the run: %+v", got)
		}
		cancel(t, s, next.Run.ID, now)
		if _, err := s.RunRetry(t.Context(), store.RetryParams{RunID: blocked.ID, Event: retried(now), Now: now}); err != nil {
			t.Errorf("retry once the key is free: %v", err)
		}
	}},

	{"KeyHeldRefusalNamesNoOtherRun", func(t *testing.T, s store.Store) {
		// Every store refuses in one wording (store.RetryKeyHeld) naming only the run retried.
		failed := running(t, s, 1)
		applyOK(t, s, mutation(failed, store.Transition{State: store.StateFailed, Attempt: 1,
			ErrorCode: "X_BOOM", Error: "boom", StopReason: history.StopAttemptsExhausted}))
		next := runParams(2)
		next.Run.Key = failed.Key
		holder := create(t, s, next)[0].Run
		now := at(time.Hour)
		_, err := s.RunRetry(t.Context(), store.RetryParams{RunID: failed.ID, Event: retried(now), Now: now})
		wantCode(t, "retry while another run holds the key", err, jobs.CodeJobNotRetryable)
		if err == nil {
			return
		}
		if strings.Contains(err.Error(), holder.ID) {
			t.Errorf("the refusal names the key's holder %s: %q", holder.ID, err.Error())
		}
		if want := store.RetryKeyHeld(failed.ID).Error(); err.Error() != want {
			t.Errorf("refusal %q, want %q", err.Error(), want)
		}
	}},

	// The key a retry must find free is the run's (job, tenant, key): another tenant's live run
	// under the same (job, key) does not refuse it, and the two runs are then live together.
	{"AnotherTenantsLiveRunDoesNotHoldTheKey", func(t *testing.T, s store.Store) {
		failed := running(t, s, 1)
		applyOK(t, s, mutation(failed, store.Transition{State: store.StateFailed, Attempt: 1,
			ErrorCode: "X_BOOM", Error: "boom", StopReason: history.StopAttemptsExhausted}))
		other := create(t, s, tenantRun(2, failed.Key, "other"), tenantRun(3, failed.Key, ""))
		wantRuns(t, "other tenants' creates", other, []int{2, 3}, []bool{true, true}, []string{"other", ""})
		now := at(time.Hour)
		got, err := s.RunRetry(t.Context(), store.RetryParams{RunID: failed.ID, Event: retried(now), Now: now})
		if err != nil || got.State != store.StateReady {
			t.Fatalf("retry beside another tenant's live run of the key: %s, %v; want ready", got.State, err)
		}
		for _, id := range []string{runID(2), runID(3)} {
			if r := get(t, s, id); r.State != store.StateReady {
				t.Errorf("run %s is %s beside the retried run; want it still ready", id, r.State)
			}
		}
		// Now its own tenant's: the key is held, by the retried run.
		res := create(t, s, tenantRun(4, failed.Key, failed.Tenant))
		wantRuns(t, "its own tenant's create", res, []int{1}, []bool{false}, []string{failed.Tenant})
	}},

	{"RefusedWhenTheHistoryMoved", func(t *testing.T, s store.Store) {
		// A retry built on a history (a retry from a step found its FromSeq in it) names the
		// history's last seq; once the run's history moved past it (another retry and its pass),
		// the retry is refused X_HISTORY_STALE and changes nothing.
		failed := running(t, s, 1)
		applyOK(t, s, mutation(failed, store.Transition{State: store.StateFailed, Attempt: 1,
			ErrorCode: "X_BOOM", Error: "boom", StopReason: history.StopAttemptsExhausted}, step("a"), step("b")))
		before := get(t, s, failed.ID)
		now := at(time.Hour)
		for _, stale := range []int64{before.LastSeq - 1, before.LastSeq + 1} {
			_, err := s.RunRetry(t.Context(), store.RetryParams{RunID: failed.ID, Event: retried(now), Now: now, ExpectLastSeq: stale})
			wantCode(t, fmt.Sprintf("retry built on seq %d, history at %d", stale, before.LastSeq), err, jobs.CodeHistoryStale)
			if after := get(t, s, failed.ID); after.State != store.StateFailed || after.LastSeq != before.LastSeq {
				t.Errorf("a refused retry changed the run: %+v", after)
			}
		}
		got, err := s.RunRetry(t.Context(), store.RetryParams{RunID: failed.ID, Event: retried(now), Now: now, ExpectLastSeq: before.LastSeq})
		if err != nil {
			t.Fatalf("retry built on the run's history: %v", err)
		}
		if got.State != store.StateReady || got.LastSeq != before.LastSeq+1 {
			t.Errorf("retried: %+v, want ready at seq %d", got, before.LastSeq+1)
		}
	}},
}
