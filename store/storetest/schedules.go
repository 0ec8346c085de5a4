package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

const role = "scheduler"

func acquire(t *testing.T, s store.Store, holder string, now, until time.Time) store.Leader {
	t.Helper()
	l, err := s.LeaderAcquire(t.Context(), store.LeaderParams{Role: role, Holder: holder, Now: now, Until: until})
	if err != nil {
		t.Fatalf("LeaderAcquire(%s): %v", holder, err)
	}
	return l
}

func initSchedules(t *testing.T, s store.Store, watermark time.Time, names ...string) []store.ScheduleState {
	t.Helper()
	sts, err := s.ScheduleInit(t.Context(), names, watermark)
	if err != nil {
		t.Fatalf("ScheduleInit: %v", err)
	}
	if len(sts) != len(names) {
		t.Fatalf("ScheduleInit: %d states for %d names", len(sts), len(names))
	}
	return sts
}

func scheduleState(t *testing.T, s store.Store, name string) store.ScheduleState {
	t.Helper()
	sts, err := s.ScheduleList(t.Context())
	if err != nil {
		t.Fatalf("ScheduleList: %v", err)
	}
	for _, st := range sts {
		if st.Name == name {
			return st
		}
	}
	t.Fatalf("ScheduleList has no %q", name)
	return store.ScheduleState{}
}

// occurrenceRun is run n created for schedule "nightly"'s occurrence at occ.
func occurrenceRun(n int, occ time.Time) store.CreateRunParams {
	p := runParams(n)
	p.Run.Job = "nightly-job"
	p.Run.Key = "nightly@" + occ.UTC().Format(time.RFC3339)
	p.Started = started(p.Run)
	return p
}

func fireParams(holder string, now, from, to time.Time, runs ...store.CreateRunParams) store.ScheduleFireParams {
	p := store.ScheduleFireParams{Name: "nightly", Role: role, Holder: holder, Now: now, From: from, To: to, Runs: runs}
	if len(runs) > 0 {
		p.LastFire = to
	}
	return p
}

var scheduleTests = []test{
	{"LeaderIsALeaseRow", func(t *testing.T, s store.Store) {
		if l := acquire(t, s, "a", at(0), at(10*time.Second)); l.Holder != "a" {
			t.Fatalf("a free role went to %q, want a", l.Holder)
		}
		if l := acquire(t, s, "b", at(5*time.Second), at(15*time.Second)); l.Holder != "a" {
			t.Errorf("b took a's unexpired lease: holder %q", l.Holder)
		}
		l := acquire(t, s, "a", at(8*time.Second), at(18*time.Second))
		if l.Holder != "a" {
			t.Fatalf("a's renewal: holder %q", l.Holder)
		}
		wantTime(t, "renewed until", l.Until, at(18*time.Second))
		if l := acquire(t, s, "b", at(17*time.Second), at(27*time.Second)); l.Holder != "a" {
			t.Errorf("b took the lease a renewed to 18s at 17s: holder %q", l.Holder)
		}
		if l := acquire(t, s, "b", at(18*time.Second), at(28*time.Second)); l.Holder != "b" {
			t.Fatalf("b could not take a's lapsed lease: holder %q", l.Holder)
		}
		if l := acquire(t, s, "a", at(19*time.Second), at(29*time.Second)); l.Holder != "b" {
			t.Errorf("the demoted a renewed over b: holder %q", l.Holder)
		}
		if err := s.LeaderRelease(t.Context(), role, "a"); err != nil {
			t.Fatal(err)
		}
		if l := acquire(t, s, "c", at(20*time.Second), at(30*time.Second)); l.Holder != "b" {
			t.Errorf("a released b's lease: holder %q", l.Holder)
		}
		if err := s.LeaderRelease(t.Context(), role, "b"); err != nil {
			t.Fatal(err)
		}
		if l := acquire(t, s, "c", at(20*time.Second), at(30*time.Second)); l.Holder != "c" {
			t.Errorf("after b released, c got %q", l.Holder)
		}
	}},

	{"ConcurrentAcquirersOneLeads", func(t *testing.T, s store.Store) {
		const n = 8
		var wg sync.WaitGroup
		holders := make([]string, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := s.LeaderAcquire(t.Context(), store.LeaderParams{Role: role, Holder: fmt.Sprintf("h%d", i), Now: at(0), Until: at(time.Minute)})
				holders[i], errs[i] = l.Holder, err
			}()
		}
		wg.Wait()
		leads := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("acquirer %d: %v", i, errs[i])
			}
			if holders[i] == fmt.Sprintf("h%d", i) {
				leads++
			}
		}
		if leads != 1 {
			t.Errorf("%d acquirers lead, want exactly 1 (holders seen %v)", leads, holders)
		}
	}},

	{"InitKeepsExistingState", func(t *testing.T, s store.Store) {
		sts := initSchedules(t, s, at(time.Hour), "nightly")
		wantTime(t, "first watermark", sts[0].Watermark, at(time.Hour))
		if sts[0].Paused || sts[0].Missed != 0 || !sts[0].LastFire.IsZero() {
			t.Errorf("a new state %+v is not blank", sts[0])
		}
		sts = initSchedules(t, s, at(5*time.Hour), "nightly", "other")
		wantTime(t, "existing watermark", sts[0].Watermark, at(time.Hour))
		wantTime(t, "new watermark", sts[1].Watermark, at(5*time.Hour))
		if sts[1].Name != "other" {
			t.Errorf("states out of order: %+v", sts)
		}
	}},

	{"FireCreatesAndAdvancesTogether", func(t *testing.T, s store.Store) {
		acquire(t, s, "a", at(0), at(time.Hour))
		initSchedules(t, s, at(0), "nightly")
		o1, o2 := at(time.Minute), at(2*time.Minute)
		p := fireParams("a", at(3*time.Minute), at(0), o2, occurrenceRun(1, o1), occurrenceRun(2, o2))
		p.Missed = 3
		res, err := s.ScheduleFire(t.Context(), p)
		if err != nil {
			t.Fatalf("ScheduleFire: %v", err)
		}
		if len(res) != 2 || res[0].Deduped || res[1].Deduped {
			t.Fatalf("ScheduleFire = %+v, want two new runs", res)
		}
		for i, r := range res {
			got := get(t, s, r.Run.ID)
			if got.Key != p.Runs[i].Run.Key || got.State != store.StateReady {
				t.Errorf("run %d: %+v", i, got)
			}
			wantKinds(t, "history", events(t, s, r.Run.ID), history.KindRunStarted)
		}
		st := scheduleState(t, s, "nightly")
		wantTime(t, "watermark", st.Watermark, o2)
		wantTime(t, "last fire", st.LastFire, o2)
		if st.LastRunID != res[1].Run.ID || st.Missed != 3 {
			t.Errorf("state %+v: want last run %s and 3 missed", st, res[1].Run.ID)
		}
		// A fire with no run (a walk that found nothing to fire) only moves the watermark.
		if _, err := s.ScheduleFire(t.Context(), fireParams("a", at(4*time.Minute), o2, at(4*time.Minute))); err != nil {
			t.Fatalf("empty fire: %v", err)
		}
		st = scheduleState(t, s, "nightly")
		wantTime(t, "watermark after an empty fire", st.Watermark, at(4*time.Minute))
		wantTime(t, "last fire after an empty fire", st.LastFire, o2)
	}},

	{"RefusedFireChangesNothing", func(t *testing.T, s store.Store) {
		initSchedules(t, s, at(0), "nightly")
		occ := at(time.Minute)
		try := func(what string, p store.ScheduleFireParams, code jobs.Code) {
			t.Helper()
			_, err := s.ScheduleFire(t.Context(), p)
			wantCode(t, what, err, code)
			if _, err := s.RunGet(t.Context(), runID(1)); !jobs.HasCode(err, jobs.CodeRunNotFound) {
				t.Errorf("%s: the refused fire created its run (%v)", what, err)
			}
			if st := scheduleState(t, s, "nightly"); !st.Watermark.Equal(at(0)) {
				t.Errorf("%s: the refused fire moved the watermark to %v", what, st.Watermark)
			}
		}
		try("no leader", fireParams("a", at(2*time.Minute), at(0), occ, occurrenceRun(1, occ)), jobs.CodeScheduleNotLeader)
		acquire(t, s, "a", at(0), at(time.Hour))
		try("another holder", fireParams("b", at(2*time.Minute), at(0), occ, occurrenceRun(1, occ)), jobs.CodeScheduleNotLeader)
		try("a lapsed lease", fireParams("a", at(time.Hour), at(0), occ, occurrenceRun(1, occ)), jobs.CodeScheduleNotLeader)
		try("a stale watermark", fireParams("a", at(2*time.Minute), at(-time.Minute), occ, occurrenceRun(1, occ)), jobs.CodeScheduleConflict)
		p := fireParams("a", at(2*time.Minute), at(0), occ, occurrenceRun(1, occ))
		p.Name = "unknown"
		try("an unknown schedule", p, jobs.CodeScheduleNotFound)
		if _, err := s.SchedulePause(t.Context(), "nightly", true, time.Time{}, at(time.Second)); err != nil {
			t.Fatal(err)
		}
		try("a paused schedule", fireParams("a", at(2*time.Minute), at(0), occ, occurrenceRun(1, occ)), jobs.CodeScheduleConflict)
	}},

	{"DemotedLeaderCannotFire", func(t *testing.T, s store.Store) {
		// a leads, lapses; b takes over and fires the occurrence. a's late fire of the same
		// occurrence (its round began while it still led) commits nothing.
		initSchedules(t, s, at(0), "nightly")
		acquire(t, s, "a", at(0), at(10*time.Second))
		occ := at(5 * time.Second)
		acquire(t, s, "b", at(11*time.Second), at(21*time.Second))
		if _, err := s.ScheduleFire(t.Context(), fireParams("b", at(12*time.Second), at(0), occ, occurrenceRun(2, occ))); err != nil {
			t.Fatalf("b's fire: %v", err)
		}
		_, err := s.ScheduleFire(t.Context(), fireParams("a", at(9*time.Second), at(0), occ, occurrenceRun(1, occ)))
		wantCode(t, "the demoted leader's fire", err, jobs.CodeScheduleNotLeader)
		if _, err := s.RunGet(t.Context(), runID(1)); !jobs.HasCode(err, jobs.CodeRunNotFound) {
			t.Errorf("the demoted leader's run exists (%v)", err)
		}
	}},

	{"ConcurrentFiresOfOneOccurrenceCreateOneRun", func(t *testing.T, s store.Store) {
		acquire(t, s, "a", at(0), at(time.Hour))
		initSchedules(t, s, at(0), "nightly")
		occ := at(time.Minute)
		const n = 6
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.ScheduleFire(t.Context(), fireParams("a", at(2*time.Minute), at(0), occ, occurrenceRun(i+1, occ)))
			}()
		}
		wg.Wait()
		ok := 0
		for i, err := range errs {
			switch {
			case err == nil:
				ok++
			case !jobs.HasCode(err, jobs.CodeScheduleConflict):
				t.Errorf("fire %d: %v, want nil or %s", i, err, jobs.CodeScheduleConflict)
			}
		}
		runs, err := s.RunList(t.Context(), store.ListParams{Job: "nightly-job"})
		if err != nil {
			t.Fatal(err)
		}
		if ok != 1 || len(runs) != 1 {
			t.Errorf("%d fires succeeded and %d runs exist; want 1 and 1", ok, len(runs))
		}
	}},

	{"FireDedupesOntoLiveRun", func(t *testing.T, s store.Store) {
		acquire(t, s, "a", at(0), at(time.Hour))
		initSchedules(t, s, at(0), "nightly")
		occ := at(time.Minute)
		live := create(t, s, occurrenceRun(1, occ))[0].Run
		res, err := s.ScheduleFire(t.Context(), fireParams("a", at(2*time.Minute), at(0), occ, occurrenceRun(2, occ)))
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 || !res[0].Deduped || res[0].Run.ID != live.ID {
			t.Errorf("fire = %+v, want deduped onto %s", res, live.ID)
		}
	}},

	{"PauseAndResume", func(t *testing.T, s store.Store) {
		initSchedules(t, s, at(0), "nightly")
		_, err := s.SchedulePause(t.Context(), "unknown", true, time.Time{}, at(0))
		wantCode(t, "pause of an unknown schedule", err, jobs.CodeScheduleNotFound)
		st, err := s.SchedulePause(t.Context(), "nightly", true, at(time.Hour), at(time.Minute))
		if err != nil || !st.Paused || !st.Watermark.Equal(at(0)) {
			t.Fatalf("pause = %+v, %v; want paused with the watermark kept", st, err)
		}
		st, err = s.SchedulePause(t.Context(), "nightly", false, at(time.Hour), at(time.Hour))
		if err != nil || st.Paused {
			t.Fatalf("resume = %+v, %v", st, err)
		}
		st = scheduleState(t, s, "nightly")
		if st.Paused {
			t.Error("the resume was not kept")
		}
		wantTime(t, "watermark after resume", st.Watermark, at(time.Hour))
		// Resuming a running schedule moves nothing.
		if _, err := s.SchedulePause(t.Context(), "nightly", false, at(2*time.Hour), at(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		wantTime(t, "watermark after a second resume", scheduleState(t, s, "nightly").Watermark, at(time.Hour))
	}},
}
