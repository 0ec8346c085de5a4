// Package storetest is the one conformance suite of store.Store. Every backend's test is
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return ...a fresh, empty store... })
//	}
//
// and nothing else: a rule of the contract is tested here once, and every backend is held to it.
// store/memory is the reference model; a backend that disagrees with it is wrong, or the
// contract is ambiguous and the ambiguity is settled here, in one place.
//
// Time never comes from the wall clock: every Now is derived from one fixed base time, so a run
// of the suite is the same on every machine and every backend.
package storetest

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// Run runs the suite. open is called once per subtest and must return a fresh, empty store
// isolated from every other (subtests run in parallel). open owns the store's lifetime: it closes
// the store in a t.Cleanup, where a backend also drops what it made for the test (a schema), so
// Close runs once per subtest, checked by the backend that knows what it releases.
func Run(t *testing.T, open func(t *testing.T) store.Store) { RunGroups(t, open) }

// RunGroups runs the named groups of the suite (every group when none is named): a backend
// checked again under another setting (a database collation, say) runs the groups it concerns.
func RunGroups(t *testing.T, open func(t *testing.T) store.Store, names ...string) {
	groups := []struct {
		name  string
		tests []test
	}{
		{"RunCreate", createTests},
		{"RunClaim", claimTests},
		{"ClaimShares", shareTests},
		{"RunApply", applyTests},
		{"Events", eventTests},
		{"Timers", timerTests},
		{"Leases", leaseTests},
		{"RunCancel", cancelTests},
		{"RunRetry", retryTests},
		{"Inspect", inspectTests},
		{"Slots", slotTests},
		{"Workers", workerTests},
		{"TimerFiredAt", firedAtTests},
		{"Keys", keyTests},
		{"AfterSeq", seqTests},
		{"Manifest", manifestTests},
		{"Schedules", scheduleTests},
		{"Backfills", backfillTests},
		{"Dedupe", dedupeTests},
		{"Search", searchTests},
		{"Bulk", bulkTests},
		{"Children", childTests},
		{"Trace", traceTests},
		{"Retention", retentionTests},
		{"Flow", flowTests},
		{"RateLimits", rateTests},
		{"ByteOrder", byteOrderTests},
	}
	for _, g := range groups {
		if len(names) > 0 && !slices.Contains(names, g.name) {
			continue
		}
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(t, open(t))
				})
			}
		})
	}
}

type test struct {
	name string
	fn   func(t *testing.T, s store.Store)
}

// base is the suite's clock: every time is base plus an offset.
var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return base.Add(d) }

// Times the helpers use, so a test can name them.
var (
	claimedAt   = at(time.Second)     // when the helpers claim
	leaseUntil  = at(time.Minute)     // the lease the helpers' claims take
	appliedAt   = at(2 * time.Second) // the Now of the helpers' mutations
	sleepUntil  = at(time.Hour)       // when the helpers' timers are due
	stickyOwner = "w1"                // the worker the helpers claim for
)

// runID is the id of run n. Ids are UUID-shaped (a backend may keep them in a uuid column) and
// sort by n, as time-ordered UUIDv7 ids sort by creation.
func runID(n int) string { return fmt.Sprintf("00000000-0000-7000-8000-%012d", n) }

// eventID is the id of published event n.
func eventID(n int) string { return fmt.Sprintf("00000000-0000-7000-9000-%012d", n) }

// runParams is ready run n: job "job", queue "q<n>" (so a claim of that queue takes exactly this
// run), key "key-<n>", created and ready at base+n ms.
func runParams(n int) store.CreateRunParams {
	created := at(time.Duration(n) * time.Millisecond)
	r := store.Run{
		ID:        runID(n),
		Job:       "job",
		Queue:     fmt.Sprintf("q%d", n),
		Key:       fmt.Sprintf("key-%d", n),
		Tenant:    "tenant",
		Input:     []byte(fmt.Sprintf("input-%d", n)),
		State:     store.StateReady,
		Attempt:   1,
		ReadyAt:   created,
		CreatedAt: created,
	}
	return store.CreateRunParams{Run: r, Started: started(r)}
}

// tenantRun is runParams(n) under key for tenant, or for no tenant when tenant is "".
func tenantRun(n int, key, tenant string) store.CreateRunParams {
	p := runParams(n)
	p.Run.Key, p.Run.Tenant, p.Run.NoTenant = key, tenant, tenant == ""
	p.Started = started(p.Run)
	return p
}

// wantRuns checks that res[i] is runID(want[i]), created when created[i], deduped otherwise,
// and of tenant tenants[i].
func wantRuns(t *testing.T, what string, res []store.CreateRunResult, want []int, created []bool, tenants []string) {
	t.Helper()
	for i, r := range res {
		if r.Run.ID != runID(want[i]) || r.Deduped == created[i] || r.Run.Tenant != tenants[i] || r.Run.NoTenant != (tenants[i] == "") {
			t.Errorf("%s, item %d: run %s of tenant %q (no tenant %v), deduped %v; want run %s of tenant %q, deduped %v",
				what, i, r.Run.ID, r.Run.Tenant, r.Run.NoTenant, r.Deduped, runID(want[i]), tenants[i], !created[i])
		}
	}
}

func started(r store.Run) history.Event {
	return history.New(r.CreatedAt, history.RunStarted{Job: r.Job, Queue: r.Queue, Input: r.Input,
		Key: r.Key, Tenant: r.Tenant})
}

func step(name string) history.Event {
	return history.New(appliedAt, history.StepCompleted{StepName: name, Output: []byte(name)})
}

func timerFired(name string) *history.Event {
	e := history.New(sleepUntil, history.TimerFired{TimerName: name})
	return &e
}

// ---- calls that must succeed ----

func create(t *testing.T, s store.Store, ps ...store.CreateRunParams) []store.CreateRunResult {
	t.Helper()
	res, err := s.RunCreate(t.Context(), ps)
	if err != nil {
		t.Fatalf("RunCreate: %v", err)
	}
	if len(res) != len(ps) {
		t.Fatalf("RunCreate: %d results for %d runs", len(res), len(ps))
	}
	return res
}

func claim(t *testing.T, s store.Store, p store.ClaimParams) []store.Run {
	t.Helper()
	runs, err := s.RunClaim(t.Context(), p)
	if err != nil {
		t.Fatalf("RunClaim: %v", err)
	}
	return runs
}

// claimParams claims up to limit runs of queues for worker w at claimedAt, with no sticky run
// of another worker in its window.
func claimParams(w string, limit int, queues ...string) store.ClaimParams {
	return store.ClaimParams{WorkerID: w, Queues: queues, Limit: limit, Now: claimedAt,
		LeaseUntil: leaseUntil, StickyBefore: claimedAt}
}

// claimOne claims the one run p selects and fails the test if it gets another count.
func claimOne(t *testing.T, s store.Store, p store.ClaimParams) store.Run {
	t.Helper()
	p.Limit = 1
	runs := claim(t, s, p)
	if len(runs) != 1 {
		t.Fatalf("RunClaim(%v): %d runs, want 1", p.Queues, len(runs))
	}
	return runs[0]
}

func apply(t *testing.T, s store.Store, ms ...store.Mutation) []store.MutationResult {
	t.Helper()
	res, err := s.RunApply(t.Context(), ms)
	if err != nil {
		t.Fatalf("RunApply: %v", err)
	}
	if len(res) != len(ms) {
		t.Fatalf("RunApply: %d results for %d mutations", len(res), len(ms))
	}
	return res
}

// applyOK applies one mutation that must be accepted.
func applyOK(t *testing.T, s store.Store, m store.Mutation) store.MutationResult {
	t.Helper()
	res := apply(t, s, m)[0]
	if res.Err != nil {
		t.Fatalf("RunApply(%s): %v", m.RunID, res.Err)
	}
	return res
}

// mutation is a write by r's claimer at appliedAt.
func mutation(r store.Run, tr store.Transition, evs ...history.Event) store.Mutation {
	return store.Mutation{RunID: r.ID, Fence: r.Fence, Now: appliedAt, Events: evs, Transition: tr}
}

func get(t *testing.T, s store.Store, id string) store.Run {
	t.Helper()
	r, err := s.RunGet(t.Context(), id)
	if err != nil {
		t.Fatalf("RunGet(%s): %v", id, err)
	}
	return r
}

func events(t *testing.T, s store.Store, id string) []history.Event {
	t.Helper()
	evs, err := s.HistoryRead(t.Context(), id, 0, 0)
	if err != nil {
		t.Fatalf("HistoryRead(%s): %v", id, err)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("run %s: event %d has seq %d: seqs must be contiguous from 1", id, i, e.Seq)
		}
	}
	return evs
}

func fire(t *testing.T, s store.Store, now time.Time, limit int) []store.Woken {
	t.Helper()
	w, err := s.TimerFire(t.Context(), now, limit)
	if err != nil {
		t.Fatalf("TimerFire: %v", err)
	}
	return w
}

func publish(t *testing.T, s store.Store, p store.PublishParams) store.PublishResult {
	t.Helper()
	res, err := s.RunPublish(t.Context(), p)
	if err != nil {
		t.Fatalf("RunPublish(%s): %v", p.ID, err)
	}
	return res
}

func cancel(t *testing.T, s store.Store, id string, now time.Time) store.Run {
	t.Helper()
	r, err := s.RunCancel(t.Context(), id, cancelled(now), now)
	if err != nil {
		t.Fatalf("RunCancel(%s): %v", id, err)
	}
	return r
}

func cancelled(now time.Time) history.Event {
	return history.New(now, history.RunCancelled{Reason: "test"})
}

func timerNext(t *testing.T, s store.Store) (time.Time, bool) {
	t.Helper()
	due, ok, err := s.TimerNext(t.Context())
	if err != nil {
		t.Fatalf("TimerNext: %v", err)
	}
	return due, ok
}

// ---- runs in a given state ----

// running creates run n and claims it for stickyOwner: fence 1, leased until leaseUntil.
func running(t *testing.T, s store.Store, n int) store.Run {
	t.Helper()
	p := runParams(n)
	create(t, s, p)
	return claimOne(t, s, claimParams(stickyOwner, 1, p.Run.Queue))
}

// suspend parks running run r on a sleep until sleepUntil, sticky to its worker.
func suspend(t *testing.T, s store.Store, r store.Run) store.Run {
	t.Helper()
	return applyOK(t, s, mutation(r, store.Transition{State: store.StateSuspended, Sticky: true,
		Timers: []store.Timer{{Key: "sleep", DueAt: sleepUntil, Fire: timerFired("sleep")}}})).Run
}

// inState makes run n in state st through the calls the engine makes.
func inState(t *testing.T, s store.Store, n int, st store.State) store.Run {
	t.Helper()
	switch st {
	case store.StateReady:
		return create(t, s, runParams(n))[0].Run
	case store.StateDelayed:
		p := runParams(n)
		p.Run.State = store.StateDelayed
		p.Timer = &store.Timer{Key: "delay", DueAt: sleepUntil}
		return create(t, s, p)[0].Run
	case store.StateCancelled:
		create(t, s, runParams(n))
		return cancel(t, s, runID(n), appliedAt)
	}
	r := running(t, s, n)
	switch st {
	case store.StateRunning:
		return r
	case store.StateSuspended:
		return suspend(t, s, r)
	case store.StateBlocked:
		return applyOK(t, s, mutation(r, store.Transition{State: store.StateBlocked,
			ErrorCode: string(jobs.CodeReplayDiverged), Error: "diverged"})).Run
	case store.StateCompleted:
		return applyOK(t, s, mutation(r, store.Transition{State: store.StateCompleted,
			Result: []byte("done")})).Run
	case store.StateFailed:
		return applyOK(t, s, mutation(r, store.Transition{State: store.StateFailed,
			ErrorCode: "X_BOOM", Error: "boom", StopReason: history.StopTerminal})).Run
	}
	t.Fatalf("inState: unknown state %q", st)
	return store.Run{}
}

// ---- published events ----

// payload encodes fields as an event payload and returns it with its canonical field pairs.
func payload(t *testing.T, fields map[string]any) ([]byte, []string) {
	t.Helper()
	b, err := msgpack.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := history.FieldKeys(b)
	if err != nil {
		t.Fatal(err)
	}
	return b, keys
}

func matchKeys(t *testing.T, m map[string]any) []string {
	t.Helper()
	keys, err := history.MatchKeys(m)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// event is published event n named name with fields, at now.
func event(t *testing.T, n int, name string, fields map[string]any, now time.Time) store.PublishParams {
	t.Helper()
	b, keys := payload(t, fields)
	return store.PublishParams{ID: eventID(n), Name: name, Payload: b, Fields: keys, Now: now}
}

// waitFor is a suspension on a wait named "w" for event name with match m, looking back to
// lookbackFrom, with a timeout timer at sleepUntil.
func waitFor(t *testing.T, name string, m map[string]any, lookbackFrom time.Time) store.Transition {
	t.Helper()
	timedOut := history.New(sleepUntil, history.EventWaitTimedOut{WaitName: "w"})
	return store.Transition{
		State:  store.StateSuspended,
		Sticky: true,
		Timers: []store.Timer{{Key: "w", DueAt: sleepUntil, Fire: &timedOut}},
		Wait:   &store.Wait{Name: "w", Event: name, Match: matchKeys(t, m), LookbackFrom: lookbackFrom},
	}
}

func waitStarted(name string) history.Event {
	return history.New(appliedAt, history.EventWaitStarted{WaitName: "w", Event: name, TimeoutAt: sleepUntil})
}

// received returns the EventReceived payloads of a history.
func received(t *testing.T, evs []history.Event) []history.EventReceived {
	t.Helper()
	var out []history.EventReceived
	for _, e := range evs {
		if e.Kind != history.KindEventReceived {
			continue
		}
		p, err := e.Decode()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.(history.EventReceived))
	}
	return out
}

// ---- checks ----

func kinds(evs []history.Event) []history.Kind {
	out := make([]history.Kind, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

func wantKinds(t *testing.T, what string, evs []history.Event, want ...history.Kind) {
	t.Helper()
	if got := kinds(evs); !slices.Equal(got, want) {
		t.Errorf("%s: kinds %v, want %v", what, got, want)
	}
}

func wantCode(t *testing.T, what string, err error, c jobs.Code) {
	t.Helper()
	if jobs.CodeOf(err) != c {
		t.Errorf("%s: error %v, want a *jobs.Error with code %s", what, err, c)
	}
}

func wantState(t *testing.T, s store.Store, id string, st store.State) store.Run {
	t.Helper()
	r := get(t, s, id)
	if r.State != st {
		t.Errorf("run %s is %s, want %s", id, r.State, st)
	}
	return r
}

func wantTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func ids(runs []store.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

// sameWoken compares what a wake-up says of its run, not what it appended (compared apart).
func sameWoken(a, b store.Woken) bool {
	return a.RunID == b.RunID && a.Queue == b.Queue && a.WorkerID == b.WorkerID
}

// sameEvent compares two events as stored.
func sameEvent(a, b history.Event) bool {
	return a.Seq == b.Seq && a.Kind == b.Kind && a.Name == b.Name && a.At.Equal(b.At) && bytes.Equal(a.Data, b.Data)
}

func wokenIDs(ws []store.Woken) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.RunID
	}
	return out
}
