// Package engine is the run lifecycle: it turns enqueues, a worker's commands, publishes, cancels
// and retries into history events and state transitions, each committed with its events in one
// store transaction. It implements frontend.Frontend for in-process workers and the client API
// (enqueue, publish, cancel, retry, inspect) for applications, the HTTP API and the CLI.
//
// The engine holds no SQL and no per-run state in memory: every process sharing a store may run
// one, and any of them may serve any run.
package engine

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/wire"
	"github.com/ultimat3/jobs/matching"
	"github.com/ultimat3/jobs/signals"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/timers"
)

// Config configures an engine.
type Config struct {
	// Store is required.
	Store store.Store
	// Clock drives every decision by time. Defaults to the wall clock.
	Clock clock.Clock
	// Lease is the visibility window of a claim: at least frontend.MinLease. Defaults to 30s.
	Lease time.Duration
	// StickyWindow is how long a woken run is offered only to the worker keeping it parked.
	// Defaults to 2s.
	StickyWindow time.Duration
	// Lookback is how long a published event stays matchable by waits registered after it.
	// Defaults to 5m.
	Lookback time.Duration
	// MaxPayload bounds inputs, step outputs, results and event payloads, encoded. Defaults to
	// 1 MiB.
	MaxPayload int
	// Committers is how many group commits may be in flight at once. Defaults to 1: one
	// transaction in flight makes every batch as large as the load allows. Measured on 2 cores
	// with Postgres, ten-step runs, 32 in flight: 1 committer 11.7k steps/s, 4 → 9.4k, 8 → 6.4k
	// (smaller batches cost the database more CPU per step). SQLite has one writer anyway.
	Committers int
	// MaxBatch bounds the mutations of one group commit. Defaults to 512.
	MaxBatch int
	// OverlapAt lets a second group commit start while one is in flight, once this many records
	// wait for it (overlap.go). Defaults to 16; negative turns it off. Used when Committers is 1.
	OverlapAt int
	// GatherWait bounds how long a group commit, with none in flight, waits for the runs the
	// previous commit answered to send their next records (overlap.go, gather). Zero: half the
	// previous commit's duration; negative turns the wait off. Used with OverlapAt.
	GatherWait time.Duration
	// PollFallback is the longest an idle long-poll or the timer service sleeps without looking
	// at the store. Defaults to 1s.
	PollFallback time.Duration
	// SessionGrace is how long after a remote worker's session connection drops (without a
	// clean stop) the engine waits for it to attend again before releasing what it held.
	// Defaults to 1s.
	SessionGrace time.Duration
	// AllowUndeclared accepts an enqueue of a job no worker has declared (or on a queue it is
	// not declared on), for deployments that enqueue before their workers start. Such a run
	// shows why it waits (RunView.Waiting). Defaults to false: refused with X_JOB_UNDECLARED.
	AllowUndeclared bool
	// LogRuns logs one info line as each run finishes here ("jobs.run.finished": job, queue,
	// state, attempt, time since enqueue); the worker logs its own per claim. Off by default for
	// embedders; `engine serve --log-runs` (on by default) turns it on.
	LogRuns bool
	// ManifestResend is how often workers are asked to resend their manifest; a worker not heard
	// from for three times this long no longer counts as hosting what it declared: at least
	// frontend.MinResend. Defaults to 1m.
	ManifestResend time.Duration
	// Ledgers is how many runs' history summaries (step names, attempt) are kept to check
	// records without reading the history. Defaults to 16384.
	Ledgers int
	Logger  *slog.Logger
	// Backfills returns the backfills the application declares (engine/backfill.go); nil: the
	// engine knows only those its ledger holds and those the workers' manifests declare.
	Backfills BackfillDeclarations
	// DedupeRetention is how long an enqueue's DedupeID is remembered. Defaults to
	// DefaultDedupeRetention (7 days).
	DedupeRetention time.Duration
	// Retention says how long finished runs are kept (retention.go); the zero value keeps
	// completed and cancelled runs DefaultRetention, dead letters DefaultFailedRetention.
	Retention RetentionConfig
	// OldestFirst claims in plain oldest-ready order: no rotation across tenants, no priorities.
	// Defaults to false (the fair order, store/flow.go). On Postgres, Start builds the index this
	// order reads (runs_ready) if it is missing, CONCURRENTLY: on a large runs table the first
	// such start takes the build's time.
	OldestFirst bool
}

// Engine is the run lifecycle over a store.
type Engine struct {
	cfg      Config
	store    store.Store
	clock    clock.Clock
	log      *slog.Logger
	matching *matching.Service
	timers   *timers.Service
	signals  *signals.Service
	// dryPublish makes a publish's checks and publishes nothing (effects_check.go).
	dryPublish *signals.Service
	commits    chan *commitReq
	// full rings when OverlapAt records wait in commits (overlap.go).
	full chan struct{}
	// owed counts the runs the last group commit answered, still running, whose next record
	// has not arrived yet; back rings when it reaches zero; lastCommit is that commit's
	// duration in ns (overlap.go, gather).
	owed       atomic.Int64
	back       chan struct{}
	lastCommit atomic.Int64
	creates    chan *createReq
	sessions   sessions
	// ledgers caches what each recently recorded run's history says (ledger.go).
	ledgers *lru.Cache[string, *ledger]
	// fleetState is the engine's copy of the workers' manifests (manifest.go).
	fleetState fleetState
	// conflictsSaid holds the declaration conflicts already logged (manifest.go warnConflicts).
	conflictsSaid sync.Map
	// claimed remembers the job of each run recently claimed, so a heartbeat renews the slot of
	// the run's own job without reading the run (slots.go).
	claimed *lru.Cache[string, string]
	// notes says why a run's claim was last handed back (flow.go).
	notes handBackNotes
	// keyed is the memory of the keyed limits (keyed.go).
	keyed keyedState

	// keyMu guards key, the lease-token secret (lease.go), read from the store once. hmacs
	// pools HMACs keyed with it; verified remembers the claims whose token was checked.
	keyMu    sync.Mutex
	key      []byte
	hmacs    sync.Pool
	verified *lru.Cache[string, verifiedClaim]

	// dedupePruned is when expired dedupe ids were last pruned (unix ns; see once.go).
	dedupePruned atomic.Int64
	metrics      *metrics   // metrics.go
	retention    *retention // retention.go
	// finished rings when a run this engine commits becomes terminal (result.go).
	finished bell

	mu      sync.Mutex
	started bool
	// handing is held (shared) by an enqueue or a record from its look at started until its
	// request is in the create or commit loop's queue, and (exclusive) by Stop to clear started.
	// Without it a request could see the engine started, Stop could then end the loops, and the
	// request would sit in a queue nobody reads, its caller waiting for ever.
	handing sync.RWMutex
	// ranOnce is set by the first Start: a record refused while not running says whether the
	// engine is stopping or was never started (a forgotten Start).
	ranOnce bool
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

var _ frontend.Frontend = (*Engine)(nil)

// CheapClaims implements frontend.CheapClaims for the workers in this process: it is the store's
// answer (false when the store does not say).
func (e *Engine) CheapClaims() bool {
	c, ok := e.store.(frontend.CheapClaims)
	return ok && c.CheapClaims()
}

// New returns an engine; Start runs its services.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil {
		return nil, jobs.Errorf(jobs.CodeDriverUnavailable, "engine: no store configured")
	}
	if cfg.Lease != 0 && (cfg.Lease < frontend.MinLease || cfg.Lease > store.MaxLease) {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "engine: a lease of %s; it must be at least %s (or 0 for the default) and at most %s",
			cfg.Lease, frontend.MinLease, store.MaxLease)
	}
	if cfg.ManifestResend != 0 && cfg.ManifestResend < frontend.MinResend {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "engine: a manifest resend interval of %s; it must be at least %s (or 0 for the default)",
			cfg.ManifestResend, frontend.MinResend)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Lookback <= 0 {
		cfg.Lookback = 5 * time.Minute
	}
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = 1 << 20
	}
	if cfg.Committers <= 0 {
		cfg.Committers = 1
	}
	if cfg.OverlapAt == 0 {
		cfg.OverlapAt = 16
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 512
	}
	if cfg.SessionGrace <= 0 {
		cfg.SessionGrace = time.Second
	}
	e := &Engine{cfg: cfg, store: cfg.Store, clock: cfg.Clock, log: cfg.Logger, commits: make(chan *commitReq, 4096),
		full: make(chan struct{}, 1), back: make(chan struct{}, 1),
		creates: make(chan *createReq, 4096), metrics: newMetrics()}
	e.retention = newRetention(cfg.Retention)
	e.metrics.bind(e)
	if cfg.Ledgers <= 0 {
		cfg.Ledgers = 16384
	}
	if cfg.ManifestResend <= 0 {
		cfg.ManifestResend = time.Minute
	}
	e.cfg.ManifestResend = cfg.ManifestResend
	e.ledgers, _ = lru.New[string, *ledger](cfg.Ledgers)
	e.claimed, _ = lru.New[string, string](cfg.Ledgers)
	e.notes, _ = lru.New[string, string](cfg.Ledgers)
	e.verified, _ = lru.New[string, verifiedClaim](cfg.Ledgers)
	e.matching = matching.New(matching.Config{Store: cfg.Store, Clock: cfg.Clock, Lease: cfg.Lease,
		StickyWindow: cfg.StickyWindow, Fallback: cfg.PollFallback, Logger: cfg.Logger,
		OldestFirst: cfg.OldestFirst})
	e.timers = timers.New(timers.Config{Store: cfg.Store, Clock: cfg.Clock, Fallback: cfg.PollFallback,
		Retention: cfg.Lookback, OnWake: e.woke, Logger: cfg.Logger,
		OnExpired: e.metrics.expired, OnLag: func(d time.Duration) { e.metrics.timerLag.Observe(d.Seconds()) }})
	e.signals = signals.New(signals.Config{Store: cfg.Store, Clock: cfg.Clock, MaxPayload: cfg.MaxPayload, OnWake: e.woke})
	e.dryPublish = newDryPublish(cfg)
	return e, nil
}

// Start runs the committers, the timer service and, when the store is shared between processes,
// the subscription to its notifications.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return nil
	}
	e.started, e.ranOnce = true, true
	if p, ok := e.store.(store.OldestFirstPreparer); ok && e.cfg.OldestFirst {
		// The index only this claim order reads is built on demand (Postgres), so that creates
		// do not pay for it in the default, fair order. Without it the claims are still right.
		if err := p.PrepareOldestFirst(ctx); err != nil {
			e.log.Warn("jobs.engine.oldest-first-index", "err", err)
		}
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.stop = cancel
	for i := 0; i < e.cfg.Committers; i++ {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			if e.cfg.OverlapAt > 0 && e.cfg.Committers == 1 {
				e.overlapLoop(runCtx)
				return
			}
			e.commitLoop(runCtx)
		}()
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.createLoop(runCtx)
	}()
	e.timers.Start()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.retentionLoop(runCtx)
	}()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.childSweepLoop(runCtx)
	}()
	if n, ok := e.store.(store.Notifier); ok {
		sigs, err := n.Subscribe(runCtx)
		if err != nil {
			e.log.Warn("jobs.engine.notify-unavailable", "err", err)
		} else {
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				for s := range sigs {
					if s.Timer {
						e.timers.Kick()
					}
					switch {
					case s.Queue == "":
					case s.Fresh:
						e.matching.WakeQueue(s.Queue, 1) // a full claim passes the wake on
					default:
						e.matching.Wake()
					}
				}
			}()
		}
	}
	return nil
}

// Stop stops the timer service and the committers (after the commits already queued).
func (e *Engine) Stop(ctx context.Context) error {
	e.handing.Lock()
	e.mu.Lock()
	if !e.started {
		e.mu.Unlock()
		e.handing.Unlock()
		return nil
	}
	e.started = false
	e.mu.Unlock()
	e.handing.Unlock()
	e.sessions.cancelAll()
	e.timers.Stop()
	e.stop()
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Store returns the engine's store.
func (e *Engine) Store() store.Store { return e.store }

// Clock returns the engine's clock.
func (e *Engine) Clock() clock.Clock { return e.clock }

// Tick fires due timers and expires lapsed leases now; tests on a fake clock call it after
// Advance to not depend on the timer service's scheduling.
func (e *Engine) Tick(ctx context.Context) { e.timers.Tick(ctx, e.clock.Now()) }

func (e *Engine) woke(w []store.Woken) {
	for _, r := range w {
		e.settleWake(r.RunID, r.Appended)
	}
	if len(w) > 0 {
		e.matching.Wake()
	}
}

// Enqueue starts a run, or returns the live run of the same tenant (or of no tenant, for a
// no-tenant enqueue) holding the same (job, key): a key is held per (job, tenant, key)
// (store.LiveKey), so another tenant's run never answers it.
func (e *Engine) Enqueue(ctx context.Context, req jobs.EnqueueRequest) (jobs.EnqueueResult, error) {
	p, res, err := e.enqueueCreate(ctx, req)
	if err != nil {
		return jobs.EnqueueResult{}, err
	}
	e.wakeCreated(p, res)
	return jobs.EnqueueResult{RunID: res.Run.ID, Deduped: res.Deduped}, nil
}

// enqueueCreate is Enqueue without its wake: the run prepared and created, or the run found in
// its place, the caller's own (notTheCallers). enqueueUnderLiveRun wakes only after a look at
// its enqueuer.
func (e *Engine) enqueueCreate(ctx context.Context, req jobs.EnqueueRequest) (store.CreateRunParams, store.CreateRunResult, error) {
	p, err := e.PrepareRun(ctx, req, e.clock.Now())
	if err != nil {
		return p, store.CreateRunResult{}, err
	}
	res, err := e.createFor(ctx, req, p)
	if err != nil {
		return p, store.CreateRunResult{}, err
	}
	if err := notTheCallers(req, p, res); err != nil {
		return p, store.CreateRunResult{}, err
	}
	return p, res, nil
}

// wakeCreated tells whoever runs a run enqueueCreate created: the timer service for a delayed
// run, one poll of its queue for a ready one. A run found in its place is no news.
func (e *Engine) wakeCreated(p store.CreateRunParams, res store.CreateRunResult) {
	switch {
	case res.Deduped:
	case p.Timer != nil:
		e.timers.Kick()
	default:
		e.matching.WakeQueue(p.Run.Queue, 1)
	}
}

// notTheCallers refuses a run found for an enqueue that is another tenant's. A key never finds
// one: a live run holds its key for its own tenant only (store.LiveKey), and every store answers
// an enqueue's key with its own tenant's run or none. A dedupe id can: ids are one namespace
// across tenants, and an id another tenant's enqueue recorded names that tenant's run, whatever
// tenant the request names. The caller is not handed it (a tenant-scoped caller would learn the
// id of a run it may not see, and take another tenant's run for its own): X_IDEMPOTENCY_KEY_TAKEN,
// naming neither that run nor its tenant. Without a dedupe id the store broke its contract
// (X_INVARIANT), and the run is not handed out either.
func notTheCallers(req jobs.EnqueueRequest, p store.CreateRunParams, res store.CreateRunResult) error {
	switch {
	case !res.Deduped || store.SameTenant(res.Run, p.Run):
		return nil
	case req.DedupeID != "":
		return jobs.Errorf(jobs.CodeKeyTaken, "enqueue of %q: the dedupe id %q names a run of another tenant", p.Run.Job, req.DedupeID)
	}
	return jobs.Errorf(jobs.CodeInvariant, "enqueue of %q: the store answered the key %q with a run of another tenant", p.Run.Job, p.Run.Key)
}

// PrepareRun validates an enqueue and builds the run it creates at now, with its RunStarted
// event: the one definition of a new run, shared by Enqueue and the scheduler's fires.
func (e *Engine) PrepareRun(ctx context.Context, req jobs.EnqueueRequest, now time.Time) (store.CreateRunParams, error) {
	if err := req.Validate(); err != nil {
		return store.CreateRunParams{}, err
	}
	if len(req.Input) > e.cfg.MaxPayload {
		return store.CreateRunParams{}, jobs.Errorf(jobs.CodePayloadTooLarge, "enqueue of %q: input is %d bytes, the limit is %d", req.Job, len(req.Input), e.cfg.MaxPayload)
	}
	if len(req.Input) > 0 {
		if err := wire.Value(req.Input); err != nil {
			return store.CreateRunParams{}, err
		}
	}
	if err := e.resolveQueue(ctx, &req); err != nil {
		return store.CreateRunParams{}, err
	}
	if req.Queue == "" {
		req.Queue = jobs.DefaultQueue
	}
	if len(req.Input) == 0 {
		req.Input, _ = jobs.Encode(nil)
	}
	if err := e.checkKeyed(ctx, req); err != nil {
		return store.CreateRunParams{}, err
	}
	if req.TraceParent == "" {
		// The caller's current span (in-process, or extracted from an API request's headers).
		req.TraceParent, req.TraceState = jobs.TraceContext(ctx)
	}
	run := store.Run{
		ID: runIDFor(ctx, now), Job: req.Job, Queue: req.Queue, Key: req.Key, Tenant: req.Tenant,
		NoTenant: req.NoTenant, EnqueuedBy: req.EnqueuedBy, Input: req.Input, State: store.StateReady,
		Attempt: 1, ReadyAt: now, CreatedAt: now, UpdatedAt: now, Priority: req.Priority,
		TraceParent: req.TraceParent, TraceState: req.TraceState,
	}
	p := store.CreateRunParams{Run: run, Started: history.New(now, history.RunStarted{
		Job: req.Job, Queue: req.Queue, Input: req.Input, Key: req.Key, Tenant: req.Tenant,
		NoTenant: req.NoTenant, EnqueuedBy: req.EnqueuedBy,
	})}
	if req.Delay > 0 {
		p.Run.State = store.StateDelayed
		p.Run.ReadyAt = now.Add(req.Delay)
		p.Timer = &store.Timer{Key: "delay", DueAt: now.Add(req.Delay)}
	}
	return p, nil
}

// PublishEvent publishes an event (payload msgpack-encoded, see jobs.Encode) to the runs
// waiting for it.
func (e *Engine) PublishEvent(ctx context.Context, name string, payload []byte) (signals.Published, error) {
	return e.signals.Publish(ctx, name, payload)
}

// Publish encodes payload and publishes it.
func (e *Engine) Publish(ctx context.Context, name string, payload any) (signals.Published, error) {
	b, err := jobs.Encode(payload)
	if err != nil {
		return signals.Published{}, err
	}
	return e.signals.Publish(ctx, name, b)
}

// Cancel cancels a run (see signals.Service.Cancel).
func (e *Engine) Cancel(ctx context.Context, runID, reason string) (store.Run, error) {
	// One rule for every surface (the API, the console, the clients, a Go caller): the reason
	// is kept in the run's history and a backfill's ledger, and shown wherever the run is.
	if err := checkOperatorText("run id", runID, "reason", reason); err != nil {
		return store.Run{}, err
	}
	run, err := e.signals.Cancel(ctx, runID, reason)
	if err == nil {
		e.metrics.cancelled(run)
		e.settled(run.State)
		e.settleCancelledPass(ctx, run, reason) // backfill.go: a pass's ledger row ends with its run
		// A cancelled run holds no slot: left to expire with its lease, it kept the next run
		// of a capped job out for up to a lease.
		e.releaseSlots(context.WithoutCancel(ctx), run)
	}
	e.cancelled(ctx, runID, run, err) // children.go: the parent hears of it, the children follow
	return run, err
}

// RetryRequest reopens a dead-lettered or blocked run.
type RetryRequest struct {
	RunID string `json:"runId"`
	// FromStep, when set, re-runs from that step: the history before it is kept, the steps from
	// it on run again. Empty: resume where the run stopped.
	FromStep string `json:"fromStep,omitempty"`
	By       string `json:"by,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Retry reopens a failed or blocked run, recording who and why.
//
// A retry from a step is built on the history it read to find the step: the store refuses it
// (X_HISTORY_STALE) if the run's history moved before the reopening (another operator's retry
// and its pass), and the step is looked up again in the history as it now is.
//
// A child its parent did not detach is not reopened once the parent is cancelled: the cancel's
// cascade cancels the live children and skips the finished ones, and a retry must not revive
// one of those under a cancelled parent (no work a cancelled parent started runs on).
func (e *Engine) Retry(ctx context.Context, req RetryRequest) (store.Run, error) {
	if err := checkOperatorText("run id", req.RunID, "fromStep", req.FromStep,
		"by", req.By, "reason", req.Reason); err != nil {
		return store.Run{}, err
	}
	link, parent, err := e.retryParent(ctx, req.RunID)
	if err != nil {
		return store.Run{}, err
	}
	for tries := 1; ; tries++ {
		run, err := e.retryOnce(ctx, req)
		if jobs.HasCode(err, jobs.CodeHistoryStale) && tries < retryStaleTries {
			continue
		}
		if err != nil {
			return run, err
		}
		e.matching.Wake()
		if parent {
			return e.retriedUnderLiveParent(ctx, link, run)
		}
		return run, nil
	}
}

// retryStaleTries bounds Retry's re-reads of a history that keeps moving under it.
const retryStaleTries = 5

// retryOnce is one try of Retry: it reads the history for a retry from a step and reopens the
// run on that history.
func (e *Engine) retryOnce(ctx context.Context, req RetryRequest) (store.Run, error) {
	ev := history.RunRetried{FromStep: req.FromStep, By: req.By, Reason: req.Reason}
	var lastSeq int64
	if req.FromStep != "" {
		events, err := e.store.HistoryRead(ctx, req.RunID, 0, 0)
		if err != nil {
			return store.Run{}, err
		}
		// The newest record of that step in the effective history, its completion or a failure
		// the body went on past: one an earlier retry discarded (recorded at or after its
		// FromSeq) is not one, as the replay's fold does not count it. Found among them, the
		// retry discarded what was recorded since, steps that still stood included, and ran
		// them again.
		for _, ev2 := range events {
			lastSeq = ev2.Seq
			switch ev2.Kind {
			case history.KindStepCompleted, history.KindStepFailed:
				if ev2.Name == req.FromStep {
					ev.FromSeq = ev2.Seq
				}
			case history.KindRunRetried:
				p, err := ev2.Decode()
				if err != nil {
					return store.Run{}, err
				}
				if from := p.(history.RunRetried).FromSeq; from > 0 && ev.FromSeq >= from {
					ev.FromSeq = 0
				}
			}
		}
		if ev.FromSeq == 0 {
			return store.Run{}, jobs.Errorf(jobs.CodeStepNotFound, "run %s has no recorded step %q", req.RunID, req.FromStep)
		}
	}
	now := e.clock.Now()
	return e.store.RunRetry(ctx, store.RetryParams{RunID: req.RunID, Event: history.New(now, ev), Now: now,
		ExpectLastSeq: lastSeq})
}

// retryParent reads the link of a run to its parent and refuses the retry of a child its
// parent did not detach when the parent is cancelled. parent says the run is such a child (of
// a parent still live or finished otherwise), which Retry checks again once it reopened it.
// The refusal names no parent: it may be another tenant's run.
func (e *Engine) retryParent(ctx context.Context, runID string) (store.ChildLink, bool, error) {
	link, ok, err := e.store.ParentOf(ctx, runID)
	if err != nil || !ok || link.Detached {
		return link, false, err
	}
	p, err := e.store.RunGet(ctx, link.ParentID)
	switch {
	case jobs.HasCode(err, jobs.CodeRunNotFound):
		return link, false, nil // the parent is gone (retention): nothing to run under
	case err != nil:
		return link, false, err
	case p.State == store.StateCancelled:
		return link, false, jobs.Errorf(jobs.CodeJobNotRetryable,
			"run %s is a child of a cancelled run: no work a cancelled parent started runs again", runID)
	}
	return link, true, nil
}

// retriedUnderLiveParent runs after a child is reopened: a cancel of its parent that committed
// after retryParent's read had its cascade read the child while it was still finished, and
// skip it. Either the parent's cancel commits after this read, and its cascade finds the child
// live, or this read sees it and cancels the child itself, and the retry is refused.
func (e *Engine) retriedUnderLiveParent(ctx context.Context, link store.ChildLink, run store.Run) (store.Run, error) {
	p, err := e.store.RunGet(ctx, link.ParentID)
	if err != nil || p.State != store.StateCancelled {
		return run, nil
	}
	if err := e.cancelChild(context.WithoutCancel(ctx), p, run); err != nil {
		return run, err
	}
	if r, err := e.store.RunGet(ctx, run.ID); err == nil {
		run = r
	}
	return run, jobs.Errorf(jobs.CodeJobNotRetryable,
		"run %s is a child of a cancelled run: no work a cancelled parent started runs again", run.ID)
}

// checkOperatorText is the rule of an operator's cancel and retry fields (a run id, a reason,
// who, a step), the one the console and the in-process client apply: jobs.ValidIdentifier, at
// most 1,000 bytes of UTF-8 without NUL. Applied by the engine, every surface agrees. Its
// arguments are (field, value) pairs, checked in order.
func checkOperatorText(fieldValues ...string) error {
	for i := 0; i+1 < len(fieldValues); i += 2 {
		if err := jobs.ValidIdentifier(fieldValues[i], fieldValues[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// GetRun returns a run.
func (e *Engine) GetRun(ctx context.Context, id string) (store.Run, error) {
	return e.store.RunGet(ctx, id)
}

// ListRuns lists runs, newest first. It asks the store's indexed search (store.Searcher), so a
// filtered page of a large table reads a page of index entries.
func (e *Engine) ListRuns(ctx context.Context, p store.ListParams) ([]store.Run, error) {
	return e.store.RunSearch(ctx, store.RunQuery{ListParams: p})
}

// Poll implements frontend.Frontend.
func (e *Engine) Poll(ctx context.Context, req frontend.PollRequest) ([]frontend.Task, error) {
	// The signing key is read before anything is claimed: a claim must never be made without
	// the token that lets its worker write.
	key, err := e.leaseKey(ctx)
	if err != nil {
		return nil, err
	}
	// Which queues the worker may poll, which runs it may be handed and the fleet's caps come
	// from the manifest, never from the request (PollRequest.Limits is ignored).
	f, err := e.checkPoll(ctx, req)
	if err != nil {
		return nil, err
	}
	runs, err := e.matching.Poll(ctx, matching.PollParams{WorkerID: req.WorkerID, Queues: req.Queues, Max: req.Max, Wait: req.Wait})
	if err != nil {
		return nil, err
	}
	if len(runs) > 0 && ctx.Err() != nil {
		e.handBackUnanswered(ctx, req.WorkerID, runs)
		return nil, ctx.Err()
	}
	if len(runs) > 0 {
		if f, err = e.fleetView(ctx, false); err != nil {
			return nil, err
		}
		runs = e.handBackUndeclared(ctx, f, req.WorkerID, runs)
		limits := map[string]int{}
		for _, r := range runs {
			if n := f.cap(r.Job); n > 0 {
				limits[r.Job] = n
			}
		}
		if len(limits) > 0 {
			runs = e.takeSlots(ctx, runs, limits)
		}
		runs = e.takeKeyed(ctx, f, runs)
		runs = e.claimsStillHeld(ctx, f, runs) // slots.go: a cancel before the slots released none
	}
	tasks := make([]frontend.Task, len(runs))
	for i, r := range runs {
		tasks[i] = frontend.Task{RunID: r.ID, Job: r.Job, Queue: r.Queue, Fence: r.Fence, Attempt: r.Attempt,
			Input: r.Input, Key: r.Key, Tenant: r.Tenant, NoTenant: r.NoTenant, EnqueuedBy: r.EnqueuedBy,
			LastSeq: r.LastSeq, LeaseUntil: r.LeaseUntil, Lease: e.matching.Lease(),
			TraceParent: r.TraceParent, TraceState: r.TraceState}
		tasks[i].LeaseToken = e.signLease(key, r.ID, r.Fence, r.WorkerID)
		tasks[i].Tail = e.wokeTail(r.ID, r.LastSeq)
		e.claimed.Add(r.ID, r.Job)
		e.notes.Remove(r.ID)
		e.seedLedger(r)
	}
	return tasks, nil
}

// handBackUnanswered makes ready again the runs a poll claimed after its caller left (a worker
// that stopped, a connection that dropped): nobody will run them, and held until their lease
// lapsed they would wait 30 s, or for good on a clock that does not move. The claim is always
// heard to its end (matching's lone claims), because a driver cancelled mid-claim returns at once
// while the database may still commit it, after the worker's stop released what it held. No
// attempt is spent, as for a worker's own release (CmdRelease); the fence keeps a run claimed
// again since untouched.
func (e *Engine) handBackUnanswered(ctx context.Context, workerID string, runs []store.Run) {
	now := e.clock.Now()
	back := make([]store.Mutation, len(runs))
	for i, r := range runs {
		back[i] = store.Mutation{RunID: r.ID, Fence: r.Fence, Now: now,
			Transition: store.Transition{State: store.StateReady, ReadyAt: now}}
	}
	res, err := e.store.RunApply(context.WithoutCancel(ctx), back)
	if err != nil {
		e.log.Warn("jobs.poll.hand-back-failed", "worker", workerID, "runs", len(runs), "err", err)
		return
	}
	for i, r := range res {
		if r.Err == nil {
			e.matching.WakeQueue(runs[i].Queue, 1)
		}
	}
}

// Heartbeat implements frontend.Frontend.
func (e *Engine) Heartbeat(ctx context.Context, req frontend.HeartbeatRequest) (frontend.HeartbeatResponse, error) {
	if n := len(req.Leases); n > frontend.MaxHeartbeatLeases {
		// The bound the worker splits its heartbeats by (worker/heartbeat.go). Refused whole,
		// renewing nothing: the wire lets a body carry several times as many, and each costs a
		// token check, a renewal and, for a capped job, a slot's renewal and a read.
		return frontend.HeartbeatResponse{}, jobs.Errorf(jobs.CodeBadRequest, "a heartbeat of %d leases; the limit is %d (send several)", n, frontend.MaxHeartbeatLeases)
	}
	// A lease whose token does not hold is answered on its own and never reaches the store, so
	// a worker cannot renew (and keep from its rightful holder) a claim it was not given.
	refused := make([]error, len(req.Leases))
	leases := make([]store.Lease, 0, len(req.Leases))
	for i, l := range req.Leases {
		if refused[i] = e.checkLease(ctx, l.RunID, l.Fence, req.WorkerID, l.Token); refused[i] == nil {
			leases = append(leases, store.Lease{RunID: l.RunID, Fence: l.Fence})
		}
	}
	now := e.clock.Now()
	var held []error
	if len(leases) > 0 {
		var err error
		held, err = e.store.RunHeartbeat(ctx, store.HeartbeatParams{WorkerID: req.WorkerID, Leases: leases, Now: now, LeaseUntil: now.Add(e.matching.Lease())})
		if err != nil {
			return frontend.HeartbeatResponse{}, err
		}
	}
	errs := make([]error, len(req.Leases))
	for i, j := 0, 0; i < len(errs); i++ {
		if refused[i] != nil {
			errs[i] = refused[i]
			continue
		}
		errs[i] = held[j]
		j++
	}
	codes := make([]string, len(errs))
	for i, err := range errs {
		if err == nil {
			err = e.renewSlot(ctx, req.Leases[i], now)
		}
		if err != nil {
			codes[i] = string(jobs.CodeOf(err))
			if codes[i] == "" {
				codes[i] = string(jobs.CodeInternal)
			}
		}
	}
	return frontend.HeartbeatResponse{Codes: codes}, nil
}

// History implements frontend.Frontend. What it reads is folded into the run's ledger when it
// continues it (settle): a worker replaying a run reads its whole history before the run's next
// record, and a worker resuming a parked run without a tail (Task.Tail) reads what was appended
// since it parked; that record's check then reads nothing more (docs/architecture.md, "A
// wake-up reads its history at most once").
func (e *Engine) History(ctx context.Context, runID string, afterSeq int64) ([]history.Event, error) {
	events, err := e.store.HistoryRead(ctx, runID, afterSeq, 0)
	if err == nil && len(events) > 0 && events[0].Seq == afterSeq+1 { // contiguous from afterSeq
		e.settle(runID, events)
	}
	return events, err
}
