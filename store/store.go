// Package store is the engine's persistence, shaped by the run's state transitions (create with
// idempotency, claim, apply a worker's commands, heartbeat, fire timers, publish, cancel, retry,
// inspect) rather than by tables. Backends: store/memory (the reference model), store/sqlite
// (the embedded default) and store/postgres. store/storetest is the one conformance suite every
// backend runs unchanged.
//
// A store holds no business rules: the engine decides what a command means and hands the store
// the events to append and the transition to make; the store makes both in ONE transaction,
// behind a fence check, and assigns sequence numbers. The few rules that must sit inside that
// transaction to be race-free (idempotency, fencing, matching an event to waits, "a wake-up ends
// the suspension") are spelled out on the methods below, and storetest holds every backend to them.
//
// Time is always passed in (Now fields), never read from the database's clock, so an injected
// clock drives every backend the same way.
package store

import (
	"context"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
)

// State is a run's state.
type State string

const (
	StateReady     State = "ready"     // claimable now
	StateDelayed   State = "delayed"   // claimable when its timer fires (a retry backoff, a delayed enqueue)
	StateRunning   State = "running"   // claimed by a worker under a lease
	StateSuspended State = "suspended" // parked on a sleep or an event wait
	StateBlocked   State = "blocked"   // the code no longer replays its history; waits for a retry
	StateCompleted State = "completed"
	StateFailed    State = "failed" // dead-lettered
	StateCancelled State = "cancelled"
)

// States lists every state, in lifecycle order.
var States = []State{StateReady, StateDelayed, StateRunning, StateSuspended, StateBlocked,
	StateCompleted, StateFailed, StateCancelled}

// Live reports whether s holds the run's idempotency key: a second enqueue of the same tenant
// with the same key while the run is live returns this run.
func (s State) Live() bool {
	return s == StateReady || s == StateDelayed || s == StateRunning || s == StateSuspended
}

// Finished reports whether s is final: completed, failed or cancelled. (A failed run can still be
// retried by an operator; it is finished until then.)
func (s State) Finished() bool {
	return s == StateCompleted || s == StateFailed || s == StateCancelled
}

// Run is a run's row: its current state, derived from its history and kept beside it.
type Run struct {
	ID         string
	Job        string
	Queue      string
	Key        string // idempotency key
	Tenant     string
	NoTenant   bool
	EnqueuedBy string
	Input      []byte
	// Priority is a head start in its queue's claim order (see flow.go); 0 by default.
	Priority int
	State    State
	// Attempt is the number of the current (or next) attempt, from 1.
	Attempt int
	// Fence is raised by every claim (by one, or past a fence epoch in the Postgres store), so a
	// run never has the same fence twice; a worker's writes carry the fence it claimed with.
	Fence int64
	// WorkerID is the worker that holds the run (running) or that keeps it parked in its sticky
	// cache (suspended, or ready after a wake-up); "" otherwise.
	WorkerID   string
	LeaseUntil time.Time
	// ReadyAt is when the run last became ready; the sticky window runs from it.
	ReadyAt time.Time
	// LastSeq is the seq of the run's newest history event.
	LastSeq    int64
	Result     []byte
	ErrorCode  string
	Error      string
	StopReason string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt time.Time
	// TraceParent and TraceState are the W3C trace context the run was enqueued under ("" when
	// none): its attempts' spans are children of it. Set at create, never changed.
	TraceParent string
	TraceState  string
}

// Timer is a durable timer of one run. When it fires (its run being suspended or delayed), the
// store appends Fire (if set) and makes the run ready. Key is unique per run.
type Timer struct {
	Key   string
	DueAt time.Time
	Fire  *history.Event
}

// Wait is a run's wait for a published event: an event named Event whose field pairs include
// every pair of Match (canonical "field=value" strings, sorted; see history.MatchKeys).
type Wait struct {
	Name  string
	Event string
	Match []string
	// LookbackFrom: an event published at or after this time, matching and not yet delivered to
	// this run, is delivered at once instead of registering the wait.
	LookbackFrom time.Time
}

// CreateRunParams creates one run. Run.ID, Job, Queue, Key, State (ready or delayed), ReadyAt and
// CreatedAt are set by the caller; Started is the RunStarted event (seq 1). A delayed run has
// Timer set. A run's idempotency key is its (Job, Tenant, Key), a no-tenant run's Tenant being ""
// (LiveKey): one live run per tenant holds a key, and another tenant's never stands in for it.
type CreateRunParams struct {
	Run     Run
	Started history.Event
	Timer   *Timer
}

// CreateRunResult is one run created or found.
type CreateRunResult struct {
	Run Run
	// Deduped is true when a live run with the same (Job, Tenant, Key) existed; Run is that run
	// (always of the same tenant, or of no tenant for a no-tenant run) and nothing was written.
	Deduped bool
}

// ClaimParams claims up to Limit ready runs of Queues for WorkerID, or, with Shares, one claim
// for several workers at once (share.go).
type ClaimParams struct {
	WorkerID string
	Queues   []string
	Limit    int
	// Shares, when set, makes the claim serve several workers: each share is claimed for its
	// worker, up to its limit, and WorkerID and Limit must be left unset. See share.go for how
	// the runs are split.
	Shares []ClaimShare
	Now    time.Time
	// LeaseUntil is the lease a claimed run takes, except for a run whose ReadyAt is after Now:
	// that one is leased for as long (LeaseUntil - Now) from its ReadyAt (LeaseFor). Now was
	// read before the claim reached the database, and a run made ready in between, by a clock
	// that had moved on (a timer fired at a later Now, a fake clock advanced), would otherwise
	// take a lease already past by that clock, and lose it to the next lease sweep while its
	// worker runs it.
	LeaseUntil time.Time
	// StickyBefore: a ready run whose WorkerID is another worker's is claimable only if its
	// ReadyAt is at or before this time (the sticky window has passed). Runs whose WorkerID is
	// the claimer's, or "", are always claimable.
	StickyBefore time.Time
	// OldestFirst claims in plain (ReadyAt, ID) order, without tenant rotation or priorities
	// (see flow.go). The default is the fair order.
	OldestFirst bool
	// Rotation maps a queue to the tenant its previous claim ended on: the fair claim starts
	// its round after it (see flow.go). The caller keeps it; NextRotation moves it.
	Rotation map[string]string
}

// MaxLease is the longest lease a claim may take.
const MaxLease = 100 * 365 * 24 * time.Hour

// Check refuses a claim without a Now or a LeaseUntil, or with a lease longer than MaxLease:
// LeaseFor measures a lease's length from Now, and from a zero Now a lease would last for
// centuries, past the times a store can keep.
func (p ClaimParams) Check() error {
	if p.Limit < 0 {
		return jobs.Errorf(jobs.CodeBadRequest, "claim: Limit %d is negative", p.Limit)
	}
	if p.Now.IsZero() || p.LeaseUntil.IsZero() || p.LeaseUntil.Sub(p.Now) > MaxLease {
		return jobs.Errorf(jobs.CodeBadRequest, "claim: Now (%s) and LeaseUntil (%s) are both required, at most %s apart",
			p.Now.Format(time.RFC3339Nano), p.LeaseUntil.Format(time.RFC3339Nano), MaxLease)
	}
	return p.checkShares()
}

// LeaseFor is the lease a claim of p (checked by Check) gives a run ready since readyAt.
func (p ClaimParams) LeaseFor(readyAt time.Time) time.Time {
	if readyAt.After(p.Now) && p.LeaseUntil.After(p.Now) {
		return readyAt.Add(p.LeaseUntil.Sub(p.Now))
	}
	return p.LeaseUntil
}

// Transition is what a worker's commands make of a running run. The zero value leaves it running
// (a completed step).
type Transition struct {
	// State is the new state; "" keeps StateRunning.
	State State
	// Attempt, when > 0, becomes the run's attempt number.
	Attempt int
	// Result is set on completion.
	Result []byte
	// ErrorCode, Error and StopReason, when any is set, replace the run's last error.
	ErrorCode  string
	Error      string
	StopReason string
	// Timers are armed (a sleep's wake-up, a wait's timeout, a retry's backoff).
	Timers []Timer
	// Wait is registered (see Wait.LookbackFrom: it may be satisfied at once).
	Wait *Wait
	// Sticky keeps WorkerID on a suspended run: the worker holds it parked and gets first call on
	// its wake-up. Otherwise WorkerID is cleared when the run leaves StateRunning.
	Sticky bool
	// ReadyAt is set when State is StateReady (a claim handed back).
	ReadyAt time.Time
}

// Mutation is one worker write: events to append and a transition, under the claim's fence.
type Mutation struct {
	RunID string
	Fence int64
	// AfterSeq, when > 0, is the run's last seq as the writer knew it: the mutation applies only
	// if the run's LastSeq is still AfterSeq, else it is refused with X_HISTORY_STALE. The engine
	// checks a record against the history up to AfterSeq (step names, attempts); this makes that
	// check hold at commit.
	AfterSeq int64
	Now      time.Time
	Events   []history.Event
	Transition
}

// MutationResult is the outcome of one Mutation.
type MutationResult struct {
	// Err is nil, or a *jobs.Error: X_ABORTED when the run was cancelled, X_JOB_LEASE_LOST when
	// the fence is stale or the run is no longer running, X_RUN_NOT_FOUND.
	Err error
	// Appended are the events written, with their seqs. When a wait was satisfied at once from
	// the lookback window, they end with EventReceived and the run stays running.
	Appended []history.Event
	// Run is the run's row after the mutation.
	Run Run
}

// Lease is one claim a worker still holds.
type Lease struct {
	RunID string
	Fence int64
}

// HeartbeatParams renews leases.
type HeartbeatParams struct {
	WorkerID   string
	Leases     []Lease
	Now        time.Time
	LeaseUntil time.Time
}

// Woken is a run that became ready, so a poller of its queue (or its sticky worker) can be woken.
type Woken struct {
	RunID    string
	Queue    string
	WorkerID string
	// Appended is what the wake-up appended to the run's history, as stored (its seqs the run's
	// last): a fired timer's event, a delivered event's EventReceived. TimerFire and Publish fill
	// it in every store; a lapsed lease's wake-up appends nothing. The engine hands it to the
	// worker that claims the run, which then resumes a parked body without reading its history.
	Appended []history.Event
	// DueAt is when the timer that woke the run was due (TimerFire, every store); zero for other
	// wake-ups. The timer service measures its lag from it: how late each round's earliest
	// timer fired, whether or not the service slept for that timer.
	DueAt time.Time
	// Reclaimed says the run was running under the worker that WorkerRelease released: its
	// claim was taken back and its body may run again. False for a sticky reservation that
	// ended and for every other wake-up.
	Reclaimed bool
}

// PublishParams publishes one event.
type PublishParams struct {
	ID      string
	Name    string
	Payload []byte
	// Fields are the payload's canonical field pairs, sorted (history.FieldKeys).
	Fields []string
	Now    time.Time
	// Under, when set, is the claim of the run that publishes the event (a run's durable
	// publish): the publish applies only if that run is still running under that fence, checked
	// in the publish's own transaction. Otherwise it is refused with the error the run's record
	// would get (FenceRefusal: X_ABORTED when cancelled, X_JOB_LEASE_LOST; X_RUN_NOT_FOUND), and
	// nothing is published, delivered or changed. The condition is checked before the id: a
	// publish whose id is kept is refused too when its claim no longer holds. Nil checks nothing.
	Under *Lease
}

// PublishResult says what a publish did.
type PublishResult struct {
	// Delivered are the runs whose waits received the event.
	Delivered []Woken
}

// RetryParams reopens a failed or blocked run. Event is the RunRetried event to append.
type RetryParams struct {
	RunID string
	Event history.Event
	Now   time.Time
	// ExpectLastSeq, when > 0, is the run's last seq in the history the retry was built on (a
	// retry from a step read it to find the step's FromSeq): the store refuses the retry
	// X_HISTORY_STALE (StaleRetry) when the run's history has moved since, as another retry and
	// its pass would have moved it, so a FromSeq never points into a history it was not read
	// from. 0 checks nothing.
	ExpectLastSeq int64
}

// ListParams filters ListRuns. Empty fields do not filter. Runs are returned newest first;
// Before (a run id) pages backwards.
type ListParams struct {
	Queue  string
	State  State
	Job    string
	Tenant string
	Before string
	Limit  int
}

// QueueStats is one queue's depth by state.
type QueueStats struct {
	Queue  string
	Counts map[State]int
	// OldestReady is the ReadyAt of the oldest ready run; zero when none is ready.
	OldestReady time.Time
}

// SlotParams acquires or renews a fleet concurrency slot: at most Limit holders of Key at once,
// each slot expiring at Until unless renewed. Holder is the run id.
type SlotParams struct {
	Key    string
	Limit  int
	Holder string
	Now    time.Time
	Until  time.Time
}

// Store is the persistence of the engine. All methods are safe for concurrent use, from any
// number of processes sharing the backend (where the backend is shareable).
type Store interface {
	Keys      // the engine's shared secrets (keys.go)
	Manifests // what the fleet's workers declared (manifest.go)

	Searcher // search.go

	BulkCreator // many runs in one transaction (bulk.go)
	// RunCreate creates runs, each with its RunStarted event, in one transaction. A run whose
	// (Job, Tenant, Key) is held by a live run is not created: the live run is returned, Deduped.
	// Two concurrent creates with the same (Job, Tenant, Key) create exactly one run; two with the
	// same (Job, Key) for two tenants create one run each.
	RunCreate(ctx context.Context, runs []CreateRunParams) ([]CreateRunResult, error)

	// RunClaim claims ready runs in the fair claim order (rotating across each queue's tenants,
	// higher priority first within a round; see flow.go), or oldest ReadyAt first with
	// p.OldestFirst, and returns them in that order (ClaimOrder): each becomes running, its Fence
	// is bumped, WorkerID and LeaseUntil are set. A run is claimed by exactly one concurrent
	// claimer. A claim with Shares takes up to their total in that order and splits it among
	// them as ShareOut does, each run's WorkerID its share's.
	RunClaim(ctx context.Context, p ClaimParams) ([]Run, error)

	// RunApply applies mutations, ideally in one transaction (group commit). Each is checked on
	// its own: it applies only if its run is running with the same Fence; a refused mutation does
	// not stop the others. The results are in the order of the mutations. When the whole call
	// fails (the store is unreachable), it returns an error and the caller cannot know which
	// mutations committed — the engine recovers by reading the history.
	//
	// On a mutation with Transition.Wait: the store looks for a published event named Wait.Event,
	// at or after LookbackFrom, whose Fields include Wait.Match and which was not yet delivered to
	// this run (the earliest such). If there is one, it appends EventReceived for it after the
	// mutation's events, records the delivery, arms none of the mutation's timers and the run
	// stays running. Otherwise the wait is registered and the transition applies. This check and
	// RunPublish are serialised per event name, so an event published while a wait is being
	// registered is delivered exactly once, never lost.
	RunApply(ctx context.Context, ms []Mutation) ([]MutationResult, error)

	// RunHeartbeat extends the leases still held (running, same fence) to LeaseUntil, in one
	// statement. The result has one entry per lease: nil, X_ABORTED (cancelled), X_JOB_LEASE_LOST
	// (stale fence, lease lapsed and reclaimed, or no longer running) or X_RUN_NOT_FOUND.
	RunHeartbeat(ctx context.Context, p HeartbeatParams) ([]error, error)

	// RunGet returns a run, or X_RUN_NOT_FOUND.
	RunGet(ctx context.Context, id string) (Run, error)

	// RunList lists runs, newest first.
	RunList(ctx context.Context, p ListParams) ([]Run, error)

	// RunCancel cancels a run: from any live state or blocked, it becomes cancelled at once,
	// event (RunCancelled) is appended, its timers and waits are removed, and a worker holding it
	// is refused (X_ABORTED) on its next write or heartbeat. A finished run: X_JOB_NOT_CANCELLABLE.
	RunCancel(ctx context.Context, id string, event history.Event, now time.Time) (Run, error)

	// RunRetry reopens a failed or blocked run: it becomes ready with Attempt 1 and no error, and
	// p.Event is appended. Any other state: X_JOB_NOT_RETRYABLE.
	RunRetry(ctx context.Context, p RetryParams) (Run, error)

	// RunExpireLeases makes runs whose lease lapsed before now ready again (WorkerID cleared), up
	// to limit, and returns them.
	RunExpireLeases(ctx context.Context, now time.Time, limit int) ([]Woken, error)

	// HistoryRead returns the run's events with seq > afterSeq, in order, at most limit
	// (limit ≤ 0: all). An unknown run: X_RUN_NOT_FOUND.
	HistoryRead(ctx context.Context, runID string, afterSeq int64, limit int) ([]history.Event, error)

	// TimerFire fires up to limit timers due at or before now, each in order of DueAt. For each
	// timer whose run is suspended or delayed: Fire (if set) is appended with At = now (when it
	// fired, which is later than DueAt after an outage or under a backlog), every timer and wait of
	// the run is removed (a wake-up ends the suspension), and the run becomes ready (ReadyAt now).
	// A timer whose run is in any other state is dropped. Two concurrent callers never fire one
	// timer twice.
	TimerFire(ctx context.Context, now time.Time, limit int) ([]Woken, error)

	// TimerNext returns the earliest DueAt of any timer; ok is false when there is none.
	TimerNext(ctx context.Context) (due time.Time, ok bool, err error)

	// RunPublish stores the event (kept for the lookback window) and delivers it to every
	// registered wait it matches: EventReceived is appended, the run's timers and waits are
	// removed, the delivery is recorded and the run becomes ready. A publish of an id still kept
	// does nothing. With p.Under set, it applies only while the publishing run holds that claim
	// (see PublishParams.Under), and a cancel or a claim that commits concurrently is ordered
	// either before the check (the publish is refused) or after the publish's commit.
	RunPublish(ctx context.Context, p PublishParams) (PublishResult, error)

	// EventPrune deletes published events older than before; it returns how many.
	EventPrune(ctx context.Context, before time.Time) (int, error)

	// QueueStats returns every queue's depth by state.
	QueueStats(ctx context.Context) ([]QueueStats, error)

	// SlotAcquire takes or renews a slot; false when Limit other holders hold unexpired slots.
	SlotAcquire(ctx context.Context, p SlotParams) (bool, error)

	// SlotRelease gives a slot back.
	SlotRelease(ctx context.Context, key, holder string) error

	Workers
	Schedules // the cron scheduler's leader lease and watermarks (schedules.go)
	// Backfills is the backfill ledger (store/backfill.go).
	Backfills

	// Close releases the store's resources.
	Close() error

	Deduper
	Children  // parent and child runs (children.go)
	Retention // deleting finished runs after their retention period (retention.go)
	// RateLimits holds the durable counts of keyed rate limits (ratelimit.go).
	RateLimits
}

// Signal is a notification from another process sharing the store.
type Signal struct {
	// Queue is set when a run of that queue became ready; empty for a timer change.
	Queue string
	// Timer is true when a timer was armed, so timer services re-read the next due time.
	Timer bool
	// Fresh is true when the runs that became ready are new (created ready), held by no worker:
	// any one poller of the queue may claim them, so one is woken rather than all.
	Fresh bool
}

// Notifier is implemented by stores shared between processes (Postgres: LISTEN/NOTIFY). The
// engine wakes its own pollers in-process; a Notifier carries the same wake-ups across processes.
// Notifications are best-effort: pollers and timer services also poll on a fallback interval.
type Notifier interface {
	// Subscribe delivers signals until ctx ends.
	Subscribe(ctx context.Context) (<-chan Signal, error)
}

// OldestFirstPreparer is implemented by stores that keep the index only the oldest-first claim
// reads (ClaimParams.OldestFirst) apart from every create's writes: Postgres builds it when an
// engine that claims oldest-first starts, so that a database whose engines all claim in the fair
// order does without it. A claim is right whether or not it exists; without it, an oldest-first
// claim sorts the queue's ready runs.
type OldestFirstPreparer interface {
	// PrepareOldestFirst makes sure the index exists and is usable; it is idempotent and safe to
	// call from several processes at once.
	PrepareOldestFirst(ctx context.Context) error
}
