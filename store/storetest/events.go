package storetest

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// waiting makes run n suspended on waitFor(name, m, lookbackFrom), and fails if the wait was
// satisfied at once.
func waiting(t *testing.T, s store.Store, n int, name string, m map[string]any, lookbackFrom time.Time) store.Run {
	t.Helper()
	r := running(t, s, n)
	res := applyOK(t, s, mutation(r, waitFor(t, name, m, lookbackFrom), waitStarted(name)))
	if res.Run.State != store.StateSuspended {
		t.Fatalf("run %s waiting for %s: %s, want suspended", r.ID, name, res.Run.State)
	}
	return res.Run
}

var eventTests = []test{
	{"PublishDeliversToARegisteredWait", func(t *testing.T, s store.Store) {
		r := waiting(t, s, 1, "paid", map[string]any{"order": 1}, base)
		if got := get(t, s, r.ID); got.WorkerID != stickyOwner {
			t.Errorf("sticky wait: worker %q, want %s", got.WorkerID, stickyOwner)
		}
		for i, p := range []store.PublishParams{
			event(t, 1, "shipped", map[string]any{"order": 1}, at(3*time.Second)), // another name
			event(t, 2, "paid", map[string]any{"order": 2}, at(3*time.Second)),    // another value
		} {
			if res := publish(t, s, p); len(res.Delivered) != 0 {
				t.Errorf("publish %d delivered to %v", i, res.Delivered)
			}
		}
		wantState(t, s, r.ID, store.StateSuspended)

		pubAt := at(4 * time.Second)
		p := event(t, 3, "paid", map[string]any{"order": 1, "amount": 5}, pubAt)
		res := publish(t, s, p)
		want := []store.Woken{{RunID: r.ID, Queue: r.Queue, WorkerID: stickyOwner}}
		if !slices.EqualFunc(res.Delivered, want, sameWoken) {
			t.Errorf("Delivered = %+v, want %+v (the sticky worker kept)", res.Delivered, want)
		}
		evs := events(t, s, r.ID)
		wantKinds(t, "history", evs, history.KindRunStarted, history.KindEventWaitStarted, history.KindEventReceived)
		// What the delivery appended, as stored: the worker resumes from it without a read.
		if d := res.Delivered; len(d) == 1 && (len(d[0].Appended) != 1 || !sameEvent(d[0].Appended[0], evs[len(evs)-1])) {
			t.Errorf("the delivery says it appended %+v; the run's history ends %+v", d[0].Appended, evs[len(evs)-1])
		}
		if got := received(t, evs); len(got) == 1 &&
			(got[0].WaitName != "w" || got[0].EventID != p.ID || !bytes.Equal(got[0].Payload, p.Payload)) {
			t.Errorf("EventReceived %+v, want wait w, event %s and its payload", got[0], p.ID)
		}
		got := wantState(t, s, r.ID, store.StateReady)
		wantTime(t, "ReadyAt", got.ReadyAt, pubAt)
		if got.WorkerID != stickyOwner {
			t.Errorf("woken run's worker %q, want the sticky %s kept", got.WorkerID, stickyOwner)
		}
		if due, ok := timerNext(t, s); ok {
			t.Errorf("the wait's timeout is still armed (due %v): a delivery ends the suspension", due)
		}
		// The wait is gone: another matching event is not delivered.
		if res := publish(t, s, event(t, 4, "paid", map[string]any{"order": 1}, pubAt)); len(res.Delivered) != 0 {
			t.Errorf("a second event was delivered to %v", res.Delivered)
		}
		if n := len(events(t, s, r.ID)); n != 3 {
			t.Errorf("history has %d events after a second publish, want 3", n)
		}
	}},

	{"MatchIsASubsetOfTheEventsFields", func(t *testing.T, s store.Store) {
		a := waiting(t, s, 1, "e", map[string]any{"a": 1}, base)
		ab := waiting(t, s, 2, "e", map[string]any{"a": 1, "b": 2}, base)
		all := waiting(t, s, 3, "e", map[string]any{}, base)
		a2 := waiting(t, s, 4, "e", map[string]any{"a": 2}, base)
		other := waiting(t, s, 5, "other", map[string]any{"a": 1}, base)

		res := publish(t, s, event(t, 1, "e", map[string]any{"a": 1}, appliedAt))
		if got := wokenIDs(res.Delivered); !sameSet(got, []string{a.ID, all.ID}) {
			t.Errorf("{a:1} delivered to %v, want %v", got, []string{a.ID, all.ID})
		}
		res = publish(t, s, event(t, 2, "e", map[string]any{"a": 1, "b": 2, "c": 3}, appliedAt))
		if got := wokenIDs(res.Delivered); !sameSet(got, []string{ab.ID}) {
			t.Errorf("{a:1,b:2,c:3} delivered to %v, want [%s]", got, ab.ID)
		}
		wantState(t, s, a2.ID, store.StateSuspended)
		wantState(t, s, other.ID, store.StateSuspended)
	}},

	{"LookbackDeliversAnEarlierEventAtOnce", func(t *testing.T, s store.Store) {
		p := event(t, 1, "paid", map[string]any{"order": 1}, at(10*time.Second))
		publish(t, s, p)
		r := running(t, s, 1)
		res := applyOK(t, s, mutation(r, waitFor(t, "paid", map[string]any{"order": 1}, at(5*time.Second)),
			waitStarted("paid")))
		wantKinds(t, "appended", res.Appended, history.KindEventWaitStarted, history.KindEventReceived)
		if len(res.Appended) == 2 && (res.Appended[0].Seq != 2 || res.Appended[1].Seq != 3) {
			t.Errorf("appended seqs %d, %d; want 2, 3", res.Appended[0].Seq, res.Appended[1].Seq)
		}
		if got := received(t, res.Appended); len(got) == 1 &&
			(got[0].EventID != p.ID || got[0].WaitName != "w" || !bytes.Equal(got[0].Payload, p.Payload)) {
			t.Errorf("EventReceived %+v, want event %s for wait w with its payload", got[0], p.ID)
		}
		// The transition did not apply: the worker still holds the run and goes on.
		for what, x := range map[string]store.Run{"result": res.Run, "RunGet": get(t, s, r.ID)} {
			if x.State != store.StateRunning || x.WorkerID != r.WorkerID || x.Fence != r.Fence || x.LastSeq != 3 {
				t.Errorf("%s: %s, worker %q, fence %d, LastSeq %d; want running under the same claim, LastSeq 3",
					what, x.State, x.WorkerID, x.Fence, x.LastSeq)
			}
			wantTime(t, what+" LeaseUntil", x.LeaseUntil, r.LeaseUntil)
		}
		wantKinds(t, "history", events(t, s, r.ID), history.KindRunStarted, history.KindEventWaitStarted,
			history.KindEventReceived)
		if due, ok := timerNext(t, s); ok {
			t.Errorf("the satisfied wait's timeout was armed (due %v)", due)
		}
		// The wait was not registered: a later matching event leaves the running run alone.
		if res := publish(t, s, event(t, 2, "paid", map[string]any{"order": 1}, at(20*time.Second))); len(res.Delivered) != 0 {
			t.Errorf("a later event was delivered to %v", res.Delivered)
		}
		applyOK(t, s, mutation(r, store.Transition{State: store.StateCompleted}, step("after")))
		if got := received(t, events(t, s, r.ID)); len(got) != 1 {
			t.Errorf("%d events received, want 1", len(got))
		}
	}},

	{"LookbackWindowBounds", func(t *testing.T, s store.Store) {
		publish(t, s, event(t, 1, "paid", map[string]any{"order": 1}, at(3*time.Second)))
		// Published before LookbackFrom: not seen, the wait registers.
		before := waiting(t, s, 1, "paid", map[string]any{"order": 1}, at(5*time.Second))
		// Another event name with the same fields: not seen.
		other := waiting(t, s, 2, "refunded", map[string]any{"order": 1}, base)
		// Published exactly at LookbackFrom: seen.
		r := running(t, s, 3)
		res := applyOK(t, s, mutation(r, waitFor(t, "paid", map[string]any{"order": 1}, at(3*time.Second))))
		if res.Run.State != store.StateRunning || len(received(t, res.Appended)) != 1 {
			t.Errorf("event published at LookbackFrom: run %s, appended %v; want it received", res.Run.State, kinds(res.Appended))
		}
		// The registered wait still gets the next publish.
		d := publish(t, s, event(t, 2, "paid", map[string]any{"order": 1}, at(6*time.Second))).Delivered
		if got := wokenIDs(d); !slices.Equal(got, []string{before.ID}) {
			t.Errorf("delivered to %v, want [%s]", got, before.ID)
		}
		wantState(t, s, other.ID, store.StateSuspended)
	}},

	{"AnEventIsDeliveredToARunOnce", func(t *testing.T, s store.Store) {
		m := map[string]any{"k": "v"}
		e1 := event(t, 1, "e", m, at(10*time.Second))
		e2 := event(t, 2, "e", m, at(20*time.Second))
		publish(t, s, e1)
		publish(t, s, event(t, 3, "e", map[string]any{"k": "other"}, at(15*time.Second)))
		publish(t, s, e2)

		r := running(t, s, 1)
		wait := func(name string) store.Transition {
			tr := waitFor(t, "e", m, base)
			tr.Wait.Name = name
			return tr
		}
		// The earliest matching event first, then the next: never the same one twice.
		for i, want := range []string{e1.ID, e2.ID} {
			res := applyOK(t, s, mutation(r, wait(fmt.Sprintf("w%d", i))))
			got := received(t, res.Appended)
			if len(got) != 1 || got[0].EventID != want || got[0].WaitName != fmt.Sprintf("w%d", i) {
				t.Fatalf("wait %d received %+v, want event %s", i, got, want)
			}
		}
		res := applyOK(t, s, mutation(r, wait("w2")))
		if res.Run.State != store.StateSuspended || len(res.Appended) != 0 {
			t.Fatalf("third wait: %s, appended %v; want suspended: both events were delivered", res.Run.State, kinds(res.Appended))
		}
		// Delivered by publish, then not again by a later wait's lookback.
		e4 := event(t, 4, "e", m, at(30*time.Second))
		if d := publish(t, s, e4).Delivered; len(d) != 1 {
			t.Fatalf("publish delivered to %v, want the waiting run", d)
		}
		p := claimParams(stickyOwner, 1, r.Queue)
		p.Now, p.StickyBefore, p.LeaseUntil = at(31*time.Second), at(31*time.Second), at(time.Hour)
		r = claimOne(t, s, p)
		res = applyOK(t, s, mutation(r, wait("w3")))
		if res.Run.State != store.StateSuspended || len(res.Appended) != 0 {
			t.Errorf("fourth wait: %s, appended %v; want suspended: every event was delivered", res.Run.State, kinds(res.Appended))
		}
		var got []string
		for _, x := range received(t, events(t, s, r.ID)) {
			got = append(got, x.EventID)
		}
		if want := []string{e1.ID, e2.ID, e4.ID}; !slices.Equal(got, want) {
			t.Errorf("received %v, want %v", got, want)
		}
	}},

	{"PublishRacingAWaitIsDeliveredOnce", func(t *testing.T, s store.Store) {
		const rounds = 50
		byLookback, byPublish := 0, 0
		for i := range rounds {
			r := running(t, s, i+1)
			m := map[string]any{"order": i}
			tr := waitFor(t, "paid", m, base)
			p := event(t, i+1, "paid", m, appliedAt)
			var applied []store.MutationResult
			var published store.PublishResult
			var applyErr, publishErr error
			// Both calls wait on start, so neither has a head start from being launched first;
			// which one is launched first alternates too.
			start := make(chan struct{})
			calls := []func(){
				func() {
					<-start
					applied, applyErr = s.RunApply(t.Context(), []store.Mutation{mutation(r, tr, waitStarted("paid"))})
				},
				func() {
					<-start
					published, publishErr = s.RunPublish(t.Context(), p)
				},
			}
			if i%2 == 1 {
				slices.Reverse(calls)
			}
			var wg sync.WaitGroup
			for _, call := range calls {
				wg.Go(call)
			}
			close(start)
			wg.Wait()
			if applyErr != nil || publishErr != nil || len(applied) != 1 || applied[0].Err != nil {
				t.Fatalf("round %d: RunApply %v %v, RunPublish %v", i, applyErr, applied, publishErr)
			}
			got := received(t, events(t, s, r.ID))
			if len(got) != 1 || got[0].EventID != p.ID {
				t.Fatalf("round %d: received %+v, want event %s exactly once", i, got, p.ID)
			}
			lookback := len(received(t, applied[0].Appended)) == 1
			delivered := slices.Equal(wokenIDs(published.Delivered), []string{r.ID})
			switch {
			case lookback && !delivered:
				byLookback++
				wantState(t, s, r.ID, store.StateRunning)
			case delivered && !lookback:
				byPublish++
				wantState(t, s, r.ID, store.StateReady)
			default:
				t.Errorf("round %d: received by lookback %v and by publish %v; want exactly one", i, lookback, delivered)
			}
		}
		t.Logf("%d rounds: %d received by lookback, %d by publish", rounds, byLookback, byPublish)
	}},

	{"PublishUnderAHeldClaim", func(t *testing.T, s store.Store) {
		w := waiting(t, s, 1, "paid", map[string]any{"order": 1}, base)
		pub := running(t, s, 2)
		p := event(t, 1, "paid", map[string]any{"order": 1}, at(3*time.Second))
		p.Under = &store.Lease{RunID: pub.ID, Fence: pub.Fence}
		if d := publish(t, s, p).Delivered; !slices.Equal(wokenIDs(d), []string{w.ID}) {
			t.Errorf("a publish under a held claim delivered to %v, want [%s]", wokenIDs(d), w.ID)
		}
		// The condition is only read: the publishing run is as it was.
		after := get(t, s, pub.ID)
		if after.State != store.StateRunning || after.Fence != pub.Fence || after.WorkerID != pub.WorkerID || after.LastSeq != pub.LastSeq {
			t.Errorf("publishing run after its publish: %s, fence %d, worker %q, LastSeq %d; want it unchanged",
				after.State, after.Fence, after.WorkerID, after.LastSeq)
		}
		// Redone under the same claim (a record lost and sent again): the kept id is a no-op.
		w2 := waiting(t, s, 3, "paid", map[string]any{"order": 1}, at(4*time.Second))
		if d := publish(t, s, p).Delivered; len(d) != 0 {
			t.Errorf("the publish redone delivered to %v, want nothing: its id is kept", wokenIDs(d))
		}
		wantState(t, s, w2.ID, store.StateSuspended)
	}},

	{"PublishUnderAStaleFenceIsRefused", func(t *testing.T, s store.Store) {
		w := waiting(t, s, 1, "paid", map[string]any{"order": 1}, base)
		pub := running(t, s, 2)
		lapsed := leaseUntil.Add(time.Second)
		if _, err := s.RunExpireLeases(t.Context(), lapsed, 10); err != nil {
			t.Fatal(err)
		}
		p := event(t, 1, "paid", map[string]any{"order": 1}, lapsed)
		p.Under = &store.Lease{RunID: pub.ID, Fence: pub.Fence}
		// Lapsed and handed back, at the same fence: no longer running.
		_, err := s.RunPublish(t.Context(), p)
		wantCode(t, "publish under a lapsed lease", err, jobs.CodeJobLeaseLost)

		c := claimParams("w2", 1, pub.Queue)
		c.Now, c.StickyBefore, c.LeaseUntil = lapsed, lapsed, lapsed.Add(time.Minute)
		cur := claimOne(t, s, c)
		res, err := s.RunPublish(t.Context(), p)
		wantCode(t, "publish under a fence claimed again", err, jobs.CodeJobLeaseLost)
		if len(res.Delivered) != 0 {
			t.Errorf("a refused publish delivered to %v", wokenIDs(res.Delivered))
		}
		wantState(t, s, w.ID, store.StateSuspended)
		wantKinds(t, "waiting run's history", events(t, s, w.ID), history.KindRunStarted, history.KindEventWaitStarted)
		if got := get(t, s, pub.ID); got.State != store.StateRunning || got.Fence != cur.Fence || got.WorkerID != "w2" || got.LastSeq != cur.LastSeq {
			t.Errorf("publishing run after the refusal: %s, fence %d, worker %q, LastSeq %d; want w2's claim unchanged",
				got.State, got.Fence, got.WorkerID, got.LastSeq)
		}
		// Nothing was kept: a wait looking back finds no event, and the same id published
		// under the current claim is a first publish, delivered.
		look := running(t, s, 3)
		if r := applyOK(t, s, mutation(look, waitFor(t, "paid", map[string]any{"order": 1}, base))); len(received(t, r.Appended)) != 0 {
			t.Errorf("a wait's lookback received %+v from a refused publish", received(t, r.Appended))
		}
		p.Under = &store.Lease{RunID: cur.ID, Fence: cur.Fence}
		if d := publish(t, s, p).Delivered; !sameSet(wokenIDs(d), []string{w.ID, look.ID}) {
			t.Errorf("the id published under the current claim delivered to %v, want %v: the refused publish kept it",
				wokenIDs(d), []string{w.ID, look.ID})
		}
	}},

	{"PublishUnderACancelledRunIsRefused", func(t *testing.T, s store.Store) {
		w := waiting(t, s, 1, "paid", map[string]any{"order": 1}, base)
		pub := running(t, s, 2)
		cancel(t, s, pub.ID, appliedAt)
		p := event(t, 1, "paid", map[string]any{"order": 1}, at(3*time.Second))
		p.Under = &store.Lease{RunID: pub.ID, Fence: pub.Fence}
		res, err := s.RunPublish(t.Context(), p)
		wantCode(t, "publish under a cancelled run's claim", err, jobs.CodeAborted)
		if len(res.Delivered) != 0 {
			t.Errorf("a refused publish delivered to %v", wokenIDs(res.Delivered))
		}
		wantState(t, s, w.ID, store.StateSuspended)
		wantKinds(t, "waiting run's history", events(t, s, w.ID), history.KindRunStarted, history.KindEventWaitStarted)
		// The id was not kept: published without a condition, it is a first publish.
		p.Under = nil
		if d := publish(t, s, p).Delivered; !slices.Equal(wokenIDs(d), []string{w.ID}) {
			t.Errorf("the id published after the refusal delivered to %v, want [%s]", wokenIDs(d), w.ID)
		}

		p.ID, p.Under = eventID(2), &store.Lease{RunID: runID(99), Fence: 1}
		_, err = s.RunPublish(t.Context(), p)
		wantCode(t, "publish under an unknown run's claim", err, jobs.CodeRunNotFound)
	}},

	// A publish redone under a claim that no longer holds, whose id is kept (its first pass is
	// out): the claim is checked first, so it is refused as a first publish would be, and
	// changes nothing. The event stays out; the record that would tell of it is refused too.
	{"AKeptIdUnderALostClaimIsRefused", func(t *testing.T, s store.Store) {
		w := waiting(t, s, 1, "paid", map[string]any{"order": 1}, base)
		pub := running(t, s, 2)
		p := event(t, 1, "paid", map[string]any{"order": 1}, at(3*time.Second))
		p.Under = &store.Lease{RunID: pub.ID, Fence: pub.Fence}
		publish(t, s, p)
		wantState(t, s, w.ID, store.StateReady)
		cancel(t, s, pub.ID, at(4*time.Second))
		w2 := waiting(t, s, 3, "paid", map[string]any{"order": 1}, at(5*time.Second))
		res, err := s.RunPublish(t.Context(), p)
		wantCode(t, "kept id redone under a cancelled run's claim", err, jobs.CodeAborted)
		if len(res.Delivered) != 0 {
			t.Errorf("a refused publish delivered to %v", wokenIDs(res.Delivered))
		}
		wantState(t, s, w2.ID, store.StateSuspended)
		if got := received(t, events(t, s, w.ID)); len(got) != 1 || got[0].EventID != p.ID {
			t.Errorf("the first waiter received %+v, want event %s once", got, p.ID)
		}
	}},

	{"PruneDeletesOlderEvents", func(t *testing.T, s store.Store) {
		for n := 1; n <= 3; n++ {
			publish(t, s, event(t, n, "e", nil, at(time.Duration(n)*time.Second)))
		}
		n, err := s.EventPrune(t.Context(), at(2*time.Second))
		if err != nil || n != 1 {
			t.Fatalf("EventPrune(2s) = %d, %v; want 1 (the event at 1s)", n, err)
		}
		r := running(t, s, 1)
		res := applyOK(t, s, mutation(r, waitFor(t, "e", nil, base)))
		if got := received(t, res.Appended); len(got) != 1 || got[0].EventID != eventID(2) {
			t.Errorf("after the prune, lookback received %+v; want %s, the earliest left", got, eventID(2))
		}
		if n, err := s.EventPrune(t.Context(), at(time.Minute)); err != nil || n != 2 {
			t.Errorf("EventPrune(1m) = %d, %v; want 2", n, err)
		}
		if res := applyOK(t, s, mutation(r, waitFor(t, "e", nil, base))); res.Run.State != store.StateSuspended {
			t.Errorf("with every event pruned the wait was satisfied: %v", kinds(res.Appended))
		}
		if n, err := s.EventPrune(t.Context(), at(time.Hour)); err != nil || n != 0 {
			t.Errorf("EventPrune on nothing = %d, %v; want 0", n, err)
		}
	}},
}
