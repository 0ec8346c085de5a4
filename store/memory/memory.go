// Package memory is the reference model of store.Store: plain maps under one mutex. Every other
// backend is held to the same behaviour by store/storetest, so this one is written to be
// obviously correct first. It is still fast enough not to distort tests of the layers above it
// at 100k runs: claiming, firing timers and matching events use indexes, never a scan of every
// run, wait or event. It keeps nothing across restarts.
//
// Lock: one mutex guards everything, so the rules the contract requires to be race-free hold
// trivially here: a run is claimed by one claimer, a timer fires once, and a publish and a wait
// registration on the same event name are serialised.
package memory

import (
	"container/heap"
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// Store is the in-memory store. The zero value is not usable; call New.
type Store struct {
	mu     sync.Mutex
	closed bool
	// authority holds the engine's secrets and the fleet's manifest (authority.go).
	authority authority

	runs map[string]*runRec
	// live maps (Job, Tenant, Key) to the one live run holding that idempotency key.
	live map[store.LiveKey]*runRec
	// ready holds, per queue, the ready runs ordered by (ReadyAt, ID): a claim pops from the
	// front instead of scanning every run.
	ready map[string]*runHeap
	// lanes holds, per queue and tenant, the ready runs in claim order (flow.go).
	lanes map[string]map[string]*runHeap
	// running holds the running runs, the only ones a lease can lapse on.
	running map[string]*runRec
	// counts is every queue's depth by state, kept as runs change state.
	counts map[string]map[store.State]int
	// timers holds every armed timer ordered by (DueAt, run, key).
	timers timerHeap
	// waits indexes the registered waits by (event name, first pair of the match); see pairKey.
	waits map[pairKey]map[*waitRec]struct{}
	// published holds the events kept for the lookback window, in publish order, under
	// (name, pair) for each of their field pairs and under (name, "") for all of them.
	published map[pairKey][]*publishedEvent
	// publishedIDs indexes published events by id, so a second publish of an id is a no-op.
	publishedIDs map[string]*publishedEvent
	// pubSeq orders publishes that share a timestamp.
	pubSeq int64
	// slots maps a slot key to its holders and when each holder's slot expires.
	slots map[string]map[string]time.Time
	// rates holds the counted starts of each keyed rate limit (ratelimit.go); made on first use.
	rates map[string][]rateStart
	// leaders and schedules are the scheduler's lease rows and watermarks (schedules.go).
	leaders   map[string]store.Leader
	schedules map[string]store.ScheduleState
	// ledger is the backfill ledger (backfill.go); its zero value is ready.
	ledger backfillLedger
	// dedupe maps a request's dedupe id to the run it created (see dedupe.go).
	dedupe map[string]dedupeRec
	// children maps a child run's id to its link to its parent (see children.go).
	children map[string]store.ChildLink
}

// pairKey indexes waits and published events so that matching never scans every wait or every
// event of a name (a wait per order, an event per order, 100k of each, would be quadratic). A
// wait is filed under its first match pair (or "" when its match is empty): an event that
// matches the wait holds every pair of the match, the first included, so looking up the
// event's own pairs, and "", finds every wait it can match. An event is filed under each of
// its pairs, so a wait looks up its first pair only.
type pairKey struct{ name, pair string }

func waitKey(event string, match []string) pairKey {
	if len(match) == 0 {
		return pairKey{event, ""}
	}
	return pairKey{event, match[0]}
}

type runRec struct {
	run    store.Run
	events []history.Event
	timers map[string]*timerRec
	waits  map[string]*waitRec
	// delivered holds the ids of the published events this run received: an event is delivered
	// to a run at most once, whether by publish or by lookback.
	delivered map[string]bool
	// readyIdx is the run's index in its queue's ready heap; -1 when it is not there.
	readyIdx int
	// laneIdx is the run's index in its lane's heap (flow.go); -1 when it is not there.
	laneIdx int
}

type timerRec struct {
	runID string
	key   string
	dueAt time.Time
	fire  *history.Event
	idx   int // index in Store.timers
}

// waitRec is a registered wait. LookbackFrom is not kept: it only matters when the wait is
// registered, and a registered wait receives every matching event published from then on.
type waitRec struct {
	runID string
	name  string
	event string
	match []string
}

type publishedEvent struct {
	id      string
	name    string
	payload []byte
	fields  []string
	at      time.Time
	seq     int64
}

var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{
		runs:         map[string]*runRec{},
		live:         map[store.LiveKey]*runRec{},
		ready:        map[string]*runHeap{},
		lanes:        map[string]map[string]*runHeap{},
		running:      map[string]*runRec{},
		counts:       map[string]map[store.State]int{},
		waits:        map[pairKey]map[*waitRec]struct{}{},
		published:    map[pairKey][]*publishedEvent{},
		publishedIDs: map[string]*publishedEvent{},
		slots:        map[string]map[string]time.Time{},
		leaders:      map[string]store.Leader{},
		schedules:    map[string]store.ScheduleState{},
	}
}

// lock takes the store's mutex, refusing a cancelled context or a closed store. On a nil error
// the caller must unlock.
func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return jobs.Wrap(jobs.CodeStoreUnavailable, err, "memory store")
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return jobs.Errorf(jobs.CodeStoreUnavailable, "memory store is closed")
	}
	return nil
}

// ---- state and its indexes ----

// setState moves r to state to, keeping every index that depends on the state (queue counts,
// ready heaps, the running set, the live idempotency keys) in step. Every state change goes
// through here, so the indexes cannot drift from the rows. Set ReadyAt before moving a run to
// ready: the ready heap orders by it.
func (s *Store) setState(r *runRec, to store.State) {
	s.unindex(r)
	r.run.State = to
	s.index(r)
}

func (s *Store) index(r *runRec) {
	c := s.counts[r.run.Queue]
	if c == nil {
		c = map[store.State]int{}
		s.counts[r.run.Queue] = c
	}
	c[r.run.State]++
	switch r.run.State {
	case store.StateReady:
		h := s.ready[r.run.Queue]
		if h == nil {
			h = newReadyHeap()
			s.ready[r.run.Queue] = h
		}
		heap.Push(h, r)
		s.indexLane(r)
	case store.StateRunning:
		s.running[r.run.ID] = r
	}
	if r.run.State.Live() {
		s.live[r.run.LiveKey()] = r
	}
}

func (s *Store) unindex(r *runRec) {
	if r.run.State == "" { // a run being created is in no index yet
		return
	}
	c := s.counts[r.run.Queue]
	c[r.run.State]--
	if c[r.run.State] == 0 {
		delete(c, r.run.State)
	}
	switch r.run.State {
	case store.StateReady:
		heap.Remove(s.ready[r.run.Queue], r.readyIdx)
		s.unindexLane(r)
	case store.StateRunning:
		delete(s.running, r.run.ID)
	}
	if r.run.State.Live() {
		k := r.run.LiveKey()
		if s.live[k] == r {
			delete(s.live, k)
		}
	}
}

// appendEvents gives evs the run's next seqs and appends copies; it returns copies of what it
// appended.
func (s *Store) appendEvents(r *runRec, evs ...history.Event) []history.Event {
	out := make([]history.Event, 0, len(evs))
	for _, e := range evs {
		r.run.LastSeq++
		e = cloneEvent(e)
		e.Seq = r.run.LastSeq
		r.events = append(r.events, e)
		out = append(out, cloneEvent(e))
	}
	return out
}

func (s *Store) armTimer(r *runRec, t store.Timer) {
	if old := r.timers[t.Key]; old != nil { // Key is unique per run: re-arming replaces
		s.removeTimer(r, old)
	}
	tr := &timerRec{runID: r.run.ID, key: t.Key, dueAt: t.DueAt}
	if t.Fire != nil {
		e := cloneEvent(*t.Fire)
		tr.fire = &e
	}
	r.timers[t.Key] = tr
	heap.Push(&s.timers, tr)
}

func (s *Store) removeTimer(r *runRec, t *timerRec) {
	heap.Remove(&s.timers, t.idx)
	delete(r.timers, t.key)
}

func (s *Store) registerWait(r *runRec, w store.Wait) {
	if old := r.waits[w.Name]; old != nil {
		s.removeWait(r, old)
	}
	wr := &waitRec{runID: r.run.ID, name: w.Name, event: w.Event, match: slices.Clone(w.Match)}
	r.waits[w.Name] = wr
	k := waitKey(wr.event, wr.match)
	bucket := s.waits[k]
	if bucket == nil {
		bucket = map[*waitRec]struct{}{}
		s.waits[k] = bucket
	}
	bucket[wr] = struct{}{}
}

func (s *Store) removeWait(r *runRec, w *waitRec) {
	delete(r.waits, w.name)
	k := waitKey(w.event, w.match)
	bucket := s.waits[k]
	delete(bucket, w)
	if len(bucket) == 0 {
		delete(s.waits, k)
	}
}

// clearTimersAndWaits removes everything the run was parked on: a wake-up of any kind ends the
// suspension, so the timeout of a wait that was satisfied (or the wait of a timeout that fired)
// must not wake the run a second time.
func (s *Store) clearTimersAndWaits(r *runRec) {
	for _, t := range r.timers {
		s.removeTimer(r, t)
	}
	for _, w := range r.waits {
		s.removeWait(r, w)
	}
}

// wake appends evs (what woke the run, if anything) and makes the parked run ready. WorkerID is
// kept: the sticky worker gets first call.
func (s *Store) wake(r *runRec, now time.Time, evs ...history.Event) store.Woken {
	var appended []history.Event
	if len(evs) > 0 {
		appended = s.appendEvents(r, evs...)
	}
	s.clearTimersAndWaits(r)
	r.run.ReadyAt = now
	r.run.UpdatedAt = now
	s.setState(r, store.StateReady)
	return store.Woken{RunID: r.run.ID, Queue: r.run.Queue, WorkerID: r.run.WorkerID, Appended: appended}
}

// finish moves r into a final state. A finished run waits for nothing, so its timers and waits
// go too (a timer would be dropped at fire time anyway; removing it keeps TimerNext honest).
func (s *Store) finish(r *runRec, to store.State, now time.Time) {
	s.clearTimersAndWaits(r)
	r.run.WorkerID = ""
	r.run.LeaseUntil = time.Time{}
	r.run.FinishedAt = now
	s.setState(r, to)
}

// ---- RunCreate ----

func (s *Store) RunCreate(ctx context.Context, ps []store.CreateRunParams) ([]store.CreateRunResult, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return s.create(ps)
}

// create is RunCreate under the lock, so a schedule's fire shares its transaction.
func (s *Store) create(ps []store.CreateRunParams) ([]store.CreateRunResult, error) {
	// First pass: decide every outcome and refuse the whole call before writing anything, so
	// the batch is one transaction. A param is deduped against a live run or against an earlier
	// param of the same batch.
	type plan struct {
		existing *runRec // deduped onto a stored live run
		sameAs   int     // deduped onto an earlier param of the batch; -1 when not
	}
	plans := make([]plan, len(ps))
	creator := map[store.LiveKey]int{}
	ids := map[string]bool{}
	for i, p := range ps {
		plans[i].sameAs = -1
		k := p.Run.LiveKey()
		if r := s.live[k]; r != nil {
			plans[i].existing = r
			continue
		}
		if j, ok := creator[k]; ok {
			plans[i].sameAs = j
			continue
		}
		if p.Run.ID == "" {
			return nil, jobs.Errorf(jobs.CodeInvariant, "create run %d of %d: no id", i+1, len(ps))
		}
		if p.Run.State != store.StateReady && p.Run.State != store.StateDelayed {
			return nil, jobs.Errorf(jobs.CodeInvariant, "create run %s in state %q: want ready or delayed",
				p.Run.ID, p.Run.State)
		}
		if s.runs[p.Run.ID] != nil || ids[p.Run.ID] {
			return nil, jobs.Errorf(jobs.CodeInvariant, "create run %s: the id is taken", p.Run.ID)
		}
		ids[p.Run.ID] = true
		creator[k] = i
	}

	out := make([]store.CreateRunResult, len(ps))
	created := make([]*runRec, len(ps))
	for i, p := range ps {
		switch {
		case plans[i].existing != nil:
			out[i] = store.CreateRunResult{Run: cloneRun(plans[i].existing.run), Deduped: true}
			continue
		case plans[i].sameAs >= 0:
			out[i] = store.CreateRunResult{Run: cloneRun(created[plans[i].sameAs].run), Deduped: true}
			continue
		}
		run := cloneRun(p.Run)
		// The store owns these fields: a new run has no claim, no history beyond seq 1 and no
		// outcome yet, whatever the caller left in them.
		st := run.State
		run.State = ""
		run.Fence = 0
		run.WorkerID = ""
		run.LeaseUntil = time.Time{}
		run.LastSeq = 0
		run.Result = nil
		run.ErrorCode, run.Error, run.StopReason = "", "", ""
		run.UpdatedAt = run.CreatedAt
		run.FinishedAt = time.Time{}
		r := &runRec{run: run, timers: map[string]*timerRec{}, waits: map[string]*waitRec{},
			delivered: map[string]bool{}, readyIdx: -1, laneIdx: -1}
		s.runs[run.ID] = r
		s.appendEvents(r, p.Started)
		s.setState(r, st)
		if p.Timer != nil {
			s.armTimer(r, *p.Timer)
		}
		created[i] = r
		out[i] = store.CreateRunResult{Run: cloneRun(r.run)}
	}
	return out, nil
}

// ---- RunClaim ----

func (s *Store) RunClaim(ctx context.Context, p store.ClaimParams) ([]store.Run, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if !p.OldestFirst {
		return s.claimFair(p), nil
	}

	var heaps []*runHeap
	seen := map[string]bool{}
	for _, q := range p.Queues {
		if h := s.ready[q]; h != nil && !seen[q] {
			heaps = append(heaps, h)
		}
		seen[q] = true
	}

	// Pop runs in (ReadyAt, ID) order across the queues, setting aside the ones in another
	// worker's sticky window, until Limit are chosen. Everything popped is pushed back before
	// setState moves the chosen ones out, so the heaps never disagree with the rows.
	var chosen, popped []*runRec
	for total := p.Total(); len(chosen) < total; {
		var best *runHeap
		for _, h := range heaps {
			if h.Len() > 0 && (best == nil || readyLess(h.head(), best.head())) {
				best = h
			}
		}
		if best == nil {
			break
		}
		r := heap.Pop(best).(*runRec)
		popped = append(popped, r)
		if p.Claimable(r.run.WorkerID, r.run.ReadyAt) {
			chosen = append(chosen, r)
		}
	}
	for _, r := range popped {
		heap.Push(s.ready[r.run.Queue], r)
	}
	return s.claimChosen(p, chosen), nil
}

// claimChosen claims the candidates chosen, in claim order, each for the share ShareOut gives it.
func (s *Store) claimChosen(p store.ClaimParams, chosen []*runRec) []store.Run {
	holders := make([]string, len(chosen))
	for i, r := range chosen {
		holders[i] = p.Holder(r.run.WorkerID, r.run.ReadyAt)
	}
	to := p.ShareOut(holders)
	out := make([]store.Run, 0, len(chosen))
	for i, r := range chosen {
		if to[i] == "" {
			continue
		}
		r.run.Fence++
		r.run.WorkerID = to[i]
		r.run.LeaseUntil = p.LeaseFor(r.run.ReadyAt)
		r.run.UpdatedAt = p.Now
		s.setState(r, store.StateRunning)
		out = append(out, cloneRun(r.run))
	}
	return out
}

// ---- RunApply ----

func (s *Store) RunApply(ctx context.Context, ms []store.Mutation) ([]store.MutationResult, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	out := make([]store.MutationResult, len(ms))
	for i, m := range ms {
		out[i] = s.apply(m)
	}
	return out, nil
}

// holds reports why a write under fence to run id is refused, or nil when it may apply.
func (s *Store) holds(id string, fence int64) (*runRec, error) {
	r := s.runs[id]
	if r == nil {
		return nil, jobs.Errorf(jobs.CodeRunNotFound, "run %s", id)
	}
	if err := store.FenceRefusal(id, r.run.State, r.run.Fence, fence); err != nil {
		return nil, err
	}
	return r, nil
}

func (s *Store) apply(m store.Mutation) store.MutationResult {
	r, err := s.holds(m.RunID, m.Fence)
	if err != nil {
		return store.MutationResult{Err: err}
	}
	if err := store.StaleSeq(r.run, m); err != nil {
		return store.MutationResult{Err: err, Run: cloneRun(r.run)}
	}
	tr := m.Transition
	to := tr.State
	if to == "" {
		to = store.StateRunning
	}
	if !slices.Contains(store.States, to) {
		return store.MutationResult{Err: jobs.Errorf(jobs.CodeInvariant, "run %s: unknown state %q", m.RunID, to)}
	}

	appended := s.appendEvents(r, m.Events...)
	r.run.UpdatedAt = m.Now

	if tr.Wait != nil {
		if ev := s.lookback(r, *tr.Wait); ev != nil {
			// The event came before the wait: receive it now. Nothing of the transition applies
			// (no state change, no timer, no registered wait), so the run stays running under
			// this worker's lease and the worker goes on past the wait.
			r.delivered[ev.id] = true
			appended = append(appended, s.appendEvents(r, received(tr.Wait.Name, ev, m.Now))...)
			return store.MutationResult{Appended: appended, Run: cloneRun(r.run)}
		}
		s.registerWait(r, *tr.Wait)
	}

	if tr.Attempt > 0 {
		r.run.Attempt = tr.Attempt
	}
	if tr.Result != nil {
		r.run.Result = slices.Clone(tr.Result)
	}
	if tr.ErrorCode != "" || tr.Error != "" || tr.StopReason != "" {
		r.run.ErrorCode, r.run.Error, r.run.StopReason = tr.ErrorCode, tr.Error, tr.StopReason
	}
	for _, t := range tr.Timers {
		s.armTimer(r, t)
	}

	switch {
	case to == store.StateRunning:
		// A completed step: the worker keeps the run and its lease.
	case to.Finished():
		s.finish(r, to, m.Now)
	default:
		if !(tr.Sticky && to == store.StateSuspended) {
			r.run.WorkerID = ""
		}
		r.run.LeaseUntil = time.Time{}
		if to == store.StateReady {
			r.run.ReadyAt = tr.ReadyAt
			if r.run.ReadyAt.IsZero() {
				r.run.ReadyAt = m.Now
			}
		}
		s.setState(r, to)
	}
	return store.MutationResult{Appended: appended, Run: cloneRun(r.run)}
}

// lookback returns the earliest published event that satisfies w for run r: named w.Event,
// published at or after w.LookbackFrom, with every pair of w.Match, not yet delivered to r.
func (s *Store) lookback(r *runRec, w store.Wait) *publishedEvent {
	var best *publishedEvent
	for _, ev := range s.published[waitKey(w.Event, w.Match)] {
		if ev.at.Before(w.LookbackFrom) || r.delivered[ev.id] || !history.Matches(w.Match, ev.fields) {
			continue
		}
		if best == nil || ev.at.Before(best.at) || (ev.at.Equal(best.at) && ev.seq < best.seq) {
			best = ev
		}
	}
	return best
}

// eventKeys are the index keys of a published event: (name, "") and (name, pair) for each of
// its field pairs. They are distinct, so a wait (filed under one key) is found at most once.
func eventKeys(ev *publishedEvent) []pairKey {
	keys := make([]pairKey, 0, len(ev.fields)+1)
	keys = append(keys, pairKey{ev.name, ""})
	for _, f := range slices.Compact(slices.Clone(ev.fields)) {
		keys = append(keys, pairKey{ev.name, f})
	}
	return keys
}

func received(waitName string, ev *publishedEvent, now time.Time) history.Event {
	return history.New(now, history.EventReceived{WaitName: waitName, EventID: ev.id,
		Payload: slices.Clone(ev.payload)})
}

// ---- RunHeartbeat ----

func (s *Store) RunHeartbeat(ctx context.Context, p store.HeartbeatParams) ([]error, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	out := make([]error, len(p.Leases))
	for i, l := range p.Leases {
		r, err := s.holds(l.RunID, l.Fence)
		if err != nil {
			out[i] = err
			continue
		}
		r.run.LeaseUntil = p.LeaseUntil
	}
	return out, nil
}

// ---- RunGet, RunList ----

func (s *Store) RunGet(ctx context.Context, id string) (store.Run, error) {
	if err := s.lock(ctx); err != nil {
		return store.Run{}, err
	}
	defer s.mu.Unlock()

	r := s.runs[id]
	if r == nil {
		return store.Run{}, jobs.Errorf(jobs.CodeRunNotFound, "run %s", id)
	}
	return cloneRun(r.run), nil
}

// RunList orders runs by id, descending: run ids are time-ordered (UUIDv7), so that is newest
// first, and Before pages with a plain id comparison that every backend can index.
func (s *Store) RunList(ctx context.Context, p store.ListParams) ([]store.Run, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	var out []store.Run
	for _, r := range s.runs {
		x := &r.run
		if (p.Queue != "" && x.Queue != p.Queue) || (p.State != "" && x.State != p.State) ||
			(p.Job != "" && x.Job != p.Job) || (p.Tenant != "" && x.Tenant != p.Tenant) ||
			(p.Before != "" && x.ID >= p.Before) {
			continue
		}
		out = append(out, *x) // cloned below, after the limit, to copy only what is returned
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	if p.Limit > 0 && len(out) > p.Limit {
		out = out[:p.Limit]
	}
	for i := range out {
		out[i] = cloneRun(out[i])
	}
	return out, nil
}

// ---- RunCancel, RunRetry ----

func (s *Store) RunCancel(ctx context.Context, id string, event history.Event, now time.Time) (store.Run, error) {
	if err := s.lock(ctx); err != nil {
		return store.Run{}, err
	}
	defer s.mu.Unlock()

	r := s.runs[id]
	if r == nil {
		return store.Run{}, jobs.Errorf(jobs.CodeRunNotFound, "run %s", id)
	}
	if r.run.State.Finished() {
		return store.Run{}, jobs.Errorf(jobs.CodeJobNotCancellable, "run %s is already %s", id, r.run.State)
	}
	s.appendEvents(r, event)
	r.run.UpdatedAt = now
	s.finish(r, store.StateCancelled, now)
	return cloneRun(r.run), nil
}

func (s *Store) RunRetry(ctx context.Context, p store.RetryParams) (store.Run, error) {
	if err := s.lock(ctx); err != nil {
		return store.Run{}, err
	}
	defer s.mu.Unlock()

	r := s.runs[p.RunID]
	if r == nil {
		return store.Run{}, jobs.Errorf(jobs.CodeRunNotFound, "run %s", p.RunID)
	}
	if r.run.State != store.StateFailed && r.run.State != store.StateBlocked {
		return store.Run{}, jobs.Errorf(jobs.CodeJobNotRetryable, "run %s is %s", p.RunID, r.run.State)
	}
	// A failed or blocked run does not hold its idempotency key, so a new run of its tenant may
	// have taken it meanwhile. Reopening this one would make two live runs share a key, which the
	// Postgres backend's unique index refuses; every backend refuses it the same way.
	if s.live[r.run.LiveKey()] != nil {
		return store.Run{}, store.RetryKeyHeld(p.RunID)
	}
	if err := store.StaleRetry(r.run, p); err != nil {
		return store.Run{}, err
	}
	s.appendEvents(r, p.Event)
	r.run.Attempt = store.RetriedAttempt(r.run)
	r.run.ErrorCode, r.run.Error, r.run.StopReason = "", "", ""
	r.run.WorkerID = ""
	r.run.LeaseUntil = time.Time{}
	r.run.FinishedAt = time.Time{}
	r.run.ReadyAt = p.Now
	r.run.UpdatedAt = p.Now
	s.setState(r, store.StateReady)
	return cloneRun(r.run), nil
}

// ---- RunExpireLeases ----

func (s *Store) RunExpireLeases(ctx context.Context, now time.Time, limit int) ([]store.Woken, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	// Only running runs hold leases, and they number at most the fleet's capacity, so a scan
	// of the running set is cheap.
	var lapsed []*runRec
	for _, r := range s.running {
		if r.run.LeaseUntil.Before(now) {
			lapsed = append(lapsed, r)
		}
	}
	sort.Slice(lapsed, func(i, j int) bool {
		a, b := lapsed[i].run, lapsed[j].run
		if !a.LeaseUntil.Equal(b.LeaseUntil) {
			return a.LeaseUntil.Before(b.LeaseUntil)
		}
		return a.ID < b.ID
	})
	if limit > 0 && len(lapsed) > limit {
		lapsed = lapsed[:limit]
	}
	out := make([]store.Woken, 0, len(lapsed))
	for _, r := range lapsed {
		r.run.WorkerID = ""
		r.run.LeaseUntil = time.Time{}
		r.run.ReadyAt = now
		r.run.UpdatedAt = now
		s.setState(r, store.StateReady)
		out = append(out, store.Woken{RunID: r.run.ID, Queue: r.run.Queue})
	}
	return out, nil
}

// ---- HistoryRead ----

func (s *Store) HistoryRead(ctx context.Context, runID string, afterSeq int64, limit int) ([]history.Event, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	r := s.runs[runID]
	if r == nil {
		return nil, jobs.Errorf(jobs.CodeRunNotFound, "run %s", runID)
	}
	// Seqs are contiguous from 1, so event seq n is r.events[n-1].
	from := max(afterSeq, 0)
	if from > int64(len(r.events)) {
		from = int64(len(r.events))
	}
	evs := r.events[from:]
	if limit > 0 && len(evs) > limit {
		evs = evs[:limit]
	}
	out := make([]history.Event, len(evs))
	for i, e := range evs {
		out[i] = cloneEvent(e)
	}
	return out, nil
}

// ---- TimerFire, TimerNext ----

func (s *Store) TimerFire(ctx context.Context, now time.Time, limit int) ([]store.Woken, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	var out []store.Woken
	for (limit <= 0 || len(out) < limit) && s.timers.Len() > 0 && !s.timers[0].dueAt.After(now) {
		t := s.timers[0]
		r := s.runs[t.runID]
		if r.run.State != store.StateSuspended && r.run.State != store.StateDelayed {
			// The run woke some other way, or finished: the timer has nothing left to wake.
			s.removeTimer(r, t)
			continue
		}
		var fired []history.Event
		if t.fire != nil {
			e := *t.fire
			e.At = now // when it fired, not when it was due
			fired = append(fired, e)
		}
		w := s.wake(r, now, fired...) // removes t with the run's other timers
		w.DueAt = t.dueAt
		out = append(out, w)
	}
	return out, nil
}

func (s *Store) TimerNext(ctx context.Context) (time.Time, bool, error) {
	if err := s.lock(ctx); err != nil {
		return time.Time{}, false, err
	}
	defer s.mu.Unlock()

	if s.timers.Len() == 0 {
		return time.Time{}, false, nil
	}
	return s.timers[0].dueAt, true, nil
}

// ---- RunPublish, EventPrune ----

func (s *Store) RunPublish(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	if err := s.lock(ctx); err != nil {
		return store.PublishResult{}, err
	}
	defer s.mu.Unlock()

	// A run's publish applies only under its claim, checked before the id: a publish refused
	// here changes nothing, whether or not its id is kept.
	if p.Under != nil {
		if _, err := s.holds(p.Under.RunID, p.Under.Fence); err != nil {
			return store.PublishResult{}, err
		}
	}
	// A publish is identified by its id: publishing it again (an outbox relay resending after
	// an unknown commit) is a no-op. The first publish delivered it to every wait registered
	// then, and a wait registered since finds it by lookback.
	if s.publishedIDs[p.ID] != nil {
		return store.PublishResult{}, nil
	}
	s.pubSeq++
	ev := &publishedEvent{id: p.ID, name: p.Name, payload: slices.Clone(p.Payload),
		fields: slices.Clone(p.Fields), at: p.Now, seq: s.pubSeq}
	s.publishedIDs[p.ID] = ev
	for _, k := range eventKeys(ev) {
		s.published[k] = append(s.published[k], ev)
	}

	// One delivery per run: if several of a run's waits match, the first by name receives it.
	var matched []*waitRec
	for _, k := range eventKeys(ev) {
		for w := range s.waits[k] {
			if history.Matches(w.match, ev.fields) {
				matched = append(matched, w)
			}
		}
	}
	sort.Slice(matched, func(i, j int) bool {
		if matched[i].runID != matched[j].runID {
			return matched[i].runID < matched[j].runID
		}
		return matched[i].name < matched[j].name
	})
	var res store.PublishResult
	for _, w := range matched {
		r := s.runs[w.runID]
		// Only a suspended run is parked on its waits; a wait left on a run in another state
		// (registered by a transition that kept it running) must not wake a run a worker holds.
		if r.run.State != store.StateSuspended || r.delivered[ev.id] {
			continue
		}
		r.delivered[ev.id] = true
		res.Delivered = append(res.Delivered, s.wake(r, p.Now, received(w.name, ev, p.Now)))
	}
	return res, nil
}

func (s *Store) EventPrune(ctx context.Context, before time.Time) (int, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()

	n := 0
	for id, ev := range s.publishedIDs {
		if ev.at.Before(before) {
			delete(s.publishedIDs, id)
			n++
		}
	}
	for k, evs := range s.published {
		kept := evs[:0]
		for _, ev := range evs {
			if !ev.at.Before(before) {
				kept = append(kept, ev)
			}
		}
		clear(evs[len(kept):]) // drop references to pruned events
		if len(kept) == 0 {
			delete(s.published, k)
		} else {
			s.published[k] = kept
		}
	}
	return n, nil
}

// ---- QueueStats ----

// QueueStats returns the queues sorted by name; Counts holds the states with at least one run.
func (s *Store) QueueStats(ctx context.Context) ([]store.QueueStats, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	out := make([]store.QueueStats, 0, len(s.counts))
	for q, c := range s.counts {
		qs := store.QueueStats{Queue: q, Counts: map[store.State]int{}}
		for st, n := range c {
			qs.Counts[st] = n
		}
		if h := s.ready[q]; h != nil && h.Len() > 0 {
			qs.OldestReady = h.head().run.ReadyAt
		}
		out = append(out, qs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out, nil
}

// ---- SlotAcquire, SlotRelease ----

func (s *Store) SlotAcquire(ctx context.Context, p store.SlotParams) (bool, error) {
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()

	holders := s.slots[p.Key]
	if holders == nil {
		holders = map[string]time.Time{}
		s.slots[p.Key] = holders
	}
	// A slot lapses at its Until. Lapsed slots are forgotten here, so a holder whose slot lapsed
	// competes for a free slot like anyone else: if the slot was taken meanwhile, it lost it.
	for h, until := range holders {
		if !until.After(p.Now) {
			delete(holders, h)
		}
	}
	if _, ok := holders[p.Holder]; !ok && len(holders) >= p.Limit {
		return false, nil
	}
	holders[p.Holder] = p.Until
	return true, nil
}

func (s *Store) SlotRelease(ctx context.Context, key, holder string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()

	if holders := s.slots[key]; holders != nil {
		delete(holders, holder)
		if len(holders) == 0 {
			delete(s.slots, key)
		}
	}
	return nil
}

// Close makes every later call fail with X_STORE_UNAVAILABLE. Closing twice is harmless.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// ---- copies ----

// cloneRun copies the run's byte slices, so no caller ever aliases the store's memory.
func cloneRun(r store.Run) store.Run {
	r.Input = slices.Clone(r.Input)
	r.Result = slices.Clone(r.Result)
	return r
}

func cloneEvent(e history.Event) history.Event {
	e.Data = slices.Clone(e.Data)
	return e
}

// ---- heaps ----

func readyLess(a, b *runRec) bool {
	if !a.run.ReadyAt.Equal(b.run.ReadyAt) {
		return a.run.ReadyAt.Before(b.run.ReadyAt)
	}
	return a.run.ID < b.run.ID
}

// runHeap is a heap of runs in an order of its own, each run keeping its index in it (at) so a
// run leaving the set is removed in O(log n). A queue's ready runs (readyLess, readyIdx) and a
// tenant's lane (laneLess, laneIdx; flow.go) are both one.
type runHeap struct {
	recs []*runRec
	less func(a, b *runRec) bool
	at   func(r *runRec) *int
}

func newReadyHeap() *runHeap {
	return &runHeap{less: readyLess, at: func(r *runRec) *int { return &r.readyIdx }}
}

// head is the first run in the heap's order; the heap must not be empty.
func (h *runHeap) head() *runRec { return h.recs[0] }

func (h *runHeap) Len() int           { return len(h.recs) }
func (h *runHeap) Less(i, j int) bool { return h.less(h.recs[i], h.recs[j]) }
func (h *runHeap) Swap(i, j int) {
	h.recs[i], h.recs[j] = h.recs[j], h.recs[i]
	*h.at(h.recs[i]), *h.at(h.recs[j]) = i, j
}
func (h *runHeap) Push(x any) {
	r := x.(*runRec)
	*h.at(r) = len(h.recs)
	h.recs = append(h.recs, r)
}
func (h *runHeap) Pop() any {
	n := len(h.recs) - 1
	r := h.recs[n]
	h.recs[n] = nil
	h.recs = h.recs[:n]
	*h.at(r) = -1
	return r
}

// timerHeap is every armed timer, earliest DueAt first (then run id and key, so firing order is
// deterministic).
type timerHeap []*timerRec

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if !a.dueAt.Equal(b.dueAt) {
		return a.dueAt.Before(b.dueAt)
	}
	if a.runID != b.runID {
		return a.runID < b.runID
	}
	return a.key < b.key
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timerRec)
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.idx = -1
	return t
}
