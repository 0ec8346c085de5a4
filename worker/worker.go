// Package worker runs job code: it polls the engine for runs of its queues, replays each run's
// history and executes its new steps, renews leases by heartbeat, keeps suspended runs parked in a
// sticky LRU so a wake-up on the same worker continues without replay, and drains on Stop: stop
// claiming, finish what is in flight, unwind what is parked.
//
// A worker reaches the engine only through frontend.Frontend, so it runs unchanged against an
// in-process engine or a remote one over HTTP.
package worker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/uuid7"
	"github.com/ultimat3/jobs/internal/verdict"
	"github.com/ultimat3/jobs/replay"
)

// Config configures a worker.
type Config struct {
	// Frontend is the engine, in-process or remote. Required.
	Frontend frontend.Frontend
	// Registry holds the jobs this worker runs. Required.
	Registry *jobs.Registry
	// ID names the worker in leases and logs. Defaults to host-pid-random.
	ID string
	// Queues maps each queue to poll to how many of its runs may execute at once. Defaults to
	// every queue of the registry's jobs, each with Concurrency.
	Queues map[string]int
	// Concurrency is the per-queue default when Queues is not set. Defaults to 10.
	Concurrency int
	// PollWait is how long one long-poll waits for work. Defaults to 10s.
	PollWait time.Duration
	// StickyRuns is how many suspended runs stay parked in memory for a wake-up without replay.
	// Defaults to 10,000; negative disables parking.
	StickyRuns int
	// HeartbeatInterval is how often leases are renewed. Defaults to a third of the lease the
	// engine grants.
	HeartbeatInterval time.Duration
	// BaseContext is the context every run executes under (the app's ambient values). Defaults
	// to context.Background().
	BaseContext func() context.Context
	// Clock times attempts, sleeps and leases. Defaults to the wall clock.
	Clock clock.Clock
	// Registerer receives the worker's metrics. Optional: default none.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// TracerProvider receives the attempt and step spans (trace.go). Defaults to the global
	// provider (otel.SetTracerProvider), whose spans are no-ops until one is installed.
	TracerProvider trace.TracerProvider
	// QuietRuns drops the one info line per claim ("jobs.run": outcome and duration); errors and
	// warnings are logged either way.
	QuietRuns bool
	// Limits is this process's budget of runs (limits.go): per replica, not for the fleet.
	Limits LimitConfig
	// NoClaimAhead keeps a claim's slot until its last record's answer is back, instead of
	// claiming the slot's next run while that record commits (ahead.go).
	NoClaimAhead bool
	// ClaimLinger is how long a poller that has runs in flight and fewer than ClaimBatch free
	// slots waits for more to free before it claims, so that it makes fewer, larger claims
	// (linger.go). An idle poller never waits. Defaults to 2ms, or to none on a frontend whose
	// claims are cheap (frontend.CheapClaims); negative disables it.
	ClaimLinger time.Duration
	// NoClaimGather makes a busy poller claim with the slots free when it wakes, instead of first
	// letting the other runs readied by the same answers free theirs (gather.go).
	NoClaimGather bool
	// ClaimBatch is how many free slots end a linger early. Defaults to a quarter of the
	// queue's concurrency when that is at least 8 (a queue of 32 slots or more), else no linger;
	// set explicitly, a poller lingers for any batch from 2.
	ClaimBatch int
}

// Worker executes runs.
type Worker struct {
	cfg   Config
	fe    frontend.Frontend
	log   *slog.Logger
	clock clock.Clock
	// clockCtx is the run context's base with the clock when BaseContext is the default (the
	// same for every run, so made once); nil when the app gives its own.
	clockCtx context.Context
	cache    *lru.Cache[string, *parked]
	metrics  metrics
	tracer   trace.Tracer

	mu      sync.Mutex
	leases  map[heldKey]*held
	lease   time.Duration
	started bool
	// pollErrs holds each queue whose last poll failed (ready.go).
	pollErrs map[string]error

	pollCtx    context.Context
	stopPoll   context.CancelFunc
	pollers    sync.WaitGroup
	inflight   sync.WaitGroup
	background sync.WaitGroup
	hbStop     chan struct{}
	// bodies hands a run's body to a goroutine between bodies (goBody).
	bodies chan func()
	hbKick chan struct{}
	// begun is closed once the session was announced; attended once attending ended.
	begun, attended chan struct{}
	stopAttend      context.CancelFunc
	// manifestKick asks for the manifest to be sent again now (manifest.go).
	manifestKick chan struct{}
	// limits are the fleet concurrency caps of the registered jobs.
	limits map[string]int
	// lim holds this process's LimitConfig (limits.go).
	lim *limiter
}

// parked is a suspended run's execution kept for a wake-up on this worker.
type parked struct {
	ex *replay.Execution
	// taken is set by whichever comes first, a resume (execution) or an eviction (the cache's
	// callback, which unparkAfter's timer and the cache's own bound reach from other
	// goroutines); only that one touches ex, so a body being resumed is never evicted under it.
	taken atomic.Bool
}

// held is a run this worker is executing under a lease.
type held struct {
	runID, queue, job string
	fence             int64
	token             string
	ex                *replay.Execution
	lastLanded        time.Time
	lost              bool
}

// New returns a worker; Start runs it.
func New(cfg Config) (*Worker, error) {
	if cfg.Frontend == nil || cfg.Registry == nil {
		return nil, jobs.Errorf(jobs.CodeInvariant, "worker: Frontend and Registry are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid7.New(time.Now())[24:])
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 10
	}
	if len(cfg.Queues) == 0 {
		cfg.Queues = map[string]int{}
		for _, q := range cfg.Registry.Queues() {
			cfg.Queues[q] = cfg.Concurrency
		}
	}
	for q, n := range cfg.Queues {
		if n < 1 {
			return nil, jobs.Errorf(jobs.CodeJobDefinition, "worker: queue %q concurrency must be at least 1, got %d", q, n)
		}
		if p := cfg.Limits.PerQueue; p > 0 && n > p {
			cfg.Queues[q] = p
		}
	}
	if l := cfg.Limits; l.PerTenant < 0 || l.PerQueue < 0 || l.Global < 0 || l.RatePerTenant.N < 0 ||
		(l.RatePerTenant.N > 0 && l.RatePerTenant.Per <= 0) {
		return nil, jobs.Errorf(jobs.CodeJobDefinition, "worker: limits %+v: caps cannot be negative and a rate needs a period", l)
	}
	if cfg.PollWait <= 0 {
		cfg.PollWait = 10 * time.Second
	}
	if cfg.StickyRuns == 0 {
		cfg.StickyRuns = 10_000
	}
	defaultBase := cfg.BaseContext == nil
	if defaultBase {
		cfg.BaseContext = context.Background
	}
	m, err := registerMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, fe: cfg.Frontend, log: cfg.Logger.With("worker", cfg.ID), clock: cfg.Clock,
		leases: map[heldKey]*held{}, metrics: m, hbKick: make(chan struct{}, 1),
		bodies:       make(chan func()),
		manifestKick: make(chan struct{}, 1), lim: newLimiter(cfg.Limits, cfg.Clock)}
	w.fe = &declaring{Frontend: cfg.Frontend, w: w}
	w.tracer = w.newTracer()
	if defaultBase {
		w.clockCtx = clock.NewContext(context.Background(), w.clock)
	}
	for _, d := range cfg.Registry.All() {
		if n := d.Config().Concurrency; n > 0 {
			if w.limits == nil {
				w.limits = map[string]int{}
			}
			w.limits[d.Name()] = n
		}
	}
	if cfg.StickyRuns > 0 {
		cache, err := lru.NewWithEvict(cfg.StickyRuns, func(_ string, p *parked) {
			if p.taken.CompareAndSwap(false, true) {
				p.ex.Evict()
			}
		})
		if err != nil {
			return nil, err
		}
		w.cache = cache
	}
	return w, nil
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

// Start begins polling. It returns at once.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return nil
	}
	w.hbStop = make(chan struct{})
	if err := w.startManifest(ctx); err != nil {
		return err
	}
	w.started = true
	w.pollCtx, w.stopPoll = context.WithCancel(context.WithoutCancel(ctx))
	w.begun, w.attended = make(chan struct{}), make(chan struct{})
	go w.begin()
	var attendCtx context.Context
	attendCtx, w.stopAttend = context.WithCancel(context.Background())
	go w.attend(attendCtx)
	for q, n := range w.cfg.Queues {
		w.pollers.Add(1)
		go w.poll(q, n)
	}
	w.background.Add(1)
	go w.heartbeatLoop()
	return nil
}

// Stop drains the worker: it stops claiming, waits for the runs in flight to finish their
// current claim (or ctx to end), unwinds the parked runs and returns.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if !w.started {
		w.mu.Unlock()
		return nil
	}
	w.started = false
	w.mu.Unlock()
	w.stopPoll()
	w.pollers.Wait()
	done := make(chan struct{})
	go func() { w.inflight.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	close(w.hbStop)
	w.background.Wait()
	if w.cache != nil {
		w.cache.Purge() // unwinds every parked body
	}
	w.end()
	return err
}

// Parked returns how many suspended runs are parked in memory.
func (w *Worker) Parked() int {
	if w.cache == nil {
		return 0
	}
	return w.cache.Len()
}

func (w *Worker) poll(queue string, concurrency int) {
	defer w.pollers.Done()
	select {
	case <-w.begun:
	case <-w.pollCtx.Done():
		return
	}
	// slots bounds the bodies running at once; held bounds the claims kept, which also counts a
	// claim whose slot went ahead (ahead.go) while its last record commits. Twice the
	// concurrency keeps that overlap bounded when the store commits slowly.
	slots := make(chan struct{}, concurrency)
	held := make(chan struct{}, 2*concurrency)
	unused := func(n int) {
		for range n {
			<-slots
			<-held
		}
	}
	run := func(c claimed) {
		defer w.inflight.Done()
		defer func() { <-held }()
		s := &slot{slots: slots}
		defer s.give()
		if !c.over {
			defer w.lim.give(1)
		}
		w.handle(c.Task, s, c.over)
	}
	// A claimed task runs on a runner goroutine that stays for the poller's next task (at most
	// one runner per held claim), not on a goroutine of its own: a claim's record reaches deep
	// into the engine and its store driver, and a fresh goroutine grew its stack there on every
	// claim, a measurable share of a no-op job's CPU. Unbuffered: a task is handed over only to a
	// runner waiting for one, else a runner is started for it.
	idle := make(chan claimed)
	backoff := 50 * time.Millisecond
	var failures pollFailures
	wait, batch := w.lingerFor(concurrency)
	for w.pollCtx.Err() == nil {
		// Wait for a free slot before asking for work, so a claimed run never waits in memory
		// while its lease runs.
		select {
		case held <- struct{}{}:
		case <-w.pollCtx.Done():
			return
		}
		select {
		case slots <- struct{}{}:
		case <-w.pollCtx.Done():
			<-held
			return
		}
		free := gather(1, concurrency, slots, held, w.cfg.NoClaimGather)
		free = linger(free, batch, wait, slots, held, w.pollCtx.Done())
		// The process-wide budget (LimitConfig.Global): never claim beyond it.
		got := w.lim.take(w.pollCtx, free)
		unused(free - got)
		if got == 0 {
			return
		}
		free = got
		back := w.lim.lend(free) // while the poll waits, pollers of other queues may borrow them
		tasks, err := w.fe.Poll(w.pollCtx, frontend.PollRequest{WorkerID: w.cfg.ID, Queues: []string{queue}, Max: free,
			Wait: w.cfg.PollWait, Limits: w.limits})
		var unasked []frontend.Task
		if err != nil {
			// A failed poll's runs are not this worker's to run (the engine's lease expiry
			// settles any it did claim): their slots are given back with the rest. Kept, each
			// held a slot for good, and a few such answers left the queue unable to claim.
			tasks = nil
		} else if len(tasks) > free {
			// An engine answered more runs than asked for (a bug, a proxy that merged answers):
			// only free slots were taken, so the rest are handed back unrun, as a run of a job
			// this worker does not host is. Run, they exceeded the queue's concurrency, and
			// their slots' release took other claims' tokens until the poller and Stop hung
			// (TestRunsBeyondAPollsAskAreHandedBack).
			tasks, unasked = tasks[:free], tasks[free:]
		}
		unused(free - len(tasks))
		within := back(len(tasks))
		if len(unasked) > 0 {
			w.log.Warn("jobs.poll.over-answered", "queue", queue, "asked", free, "answered", free+len(unasked))
			why := fmt.Sprintf("the engine answered worker %s's poll of %d runs with %d: handed back unrun", w.cfg.ID, free, free+len(unasked))
			for _, t := range unasked {
				w.inflight.Add(1)
				go func() {
					defer w.inflight.Done()
					w.handBack(t, why)
				}()
			}
		}
		if err != nil {
			if w.pollCtx.Err() != nil {
				return
			}
			w.pollResult(queue, err)
			failures.failed(w.log, queue, err, w.cfg.Clock.Now())
			select {
			case <-time.After(backoff):
			case <-w.pollCtx.Done():
			}
			// Capped low: an engine back from a restart should see its workers again at once.
			backoff = min(backoff*2, resendCap)
			continue
		}
		backoff = 50 * time.Millisecond
		failures.recovered(w.log, queue, w.cfg.Clock.Now())
		w.pollResult(queue, nil)
		for i, t := range tasks {
			c := claimed{Task: t, over: i >= within}
			w.inflight.Add(1)
			select {
			case idle <- c: // a runner between tasks took it
			default:
				go func() {
					for {
						run(c)
						select {
						case c = <-idle:
						case <-w.pollCtx.Done():
							return
						}
					}
				}()
			}
		}
	}
}

// claimed is a task a poll claimed; over when the process's Global budget had no room left for
// it (its poll's reservation was borrowed while it waited): it is handed back, not run.
type claimed struct {
	frontend.Task
	over bool
}

// newRecorder returns the recorder of a claimed task.
func (w *Worker) newRecorder(t frontend.Task) *recorder {
	rec := &recorder{fe: w.fe, w: w, runID: t.RunID, queue: t.Queue, fence: t.Fence, worker: w.cfg.ID, token: t.LeaseToken, seq: t.LastSeq, claimedAt: w.clock.Now()}
	if w.limits[t.Job] > 0 {
		rec.slot = frontend.SlotKey(t.Job)
	}
	return rec
}

// handBack releases a claimed task unrun and ready at once (no attempt spent), outside any slot.
func (w *Worker) handBack(t frontend.Task, why string) {
	log := &runLog{w: w, run: t.RunID, job: t.Job, attempt: t.Attempt}
	w.finalize(w.newRecorder(t), log, frontend.Command{Kind: frontend.CmdRelease, ReadyAt: w.clock.Now(), Error: why})
}

// handle runs one claimed task to the end of its claim, in slot s, or hands it back when over
// the process's Global budget.
func (w *Worker) handle(t frontend.Task, s *slot, over bool) {
	log := &runLog{w: w, run: t.RunID, job: t.Job, attempt: t.Attempt}
	rec := w.newRecorder(t)
	def, ok := w.cfg.Registry.Get(t.Job)
	if !ok {
		// Another worker may host it: hand it back without spending an attempt.
		log.get().Warn("jobs.job.unknown")
		w.finalize(rec, log, frontend.Command{Kind: frontend.CmdRelease, ReadyAt: w.clock.Now().Add(5 * time.Second)})
		return
	}
	if over {
		// Ready again at once: the next poll that holds a reservation claims it.
		w.metrics.handedBack.WithLabelValues(t.Queue, HandBackGlobal).Inc()
		log.get().Debug("jobs.limit.handed-back", "reason", HandBackGlobal)
		w.finalize(rec, log, frontend.Command{Kind: frontend.CmdRelease, ReadyAt: w.clock.Now(),
			Code: HandBackGlobal, Error: w.lim.explain(HandBackGlobal, t, w.cfg.ID)})
		return
	}
	if ok, reason, readyAt := w.lim.admit(t); !ok {
		// Over this process's budget: handed back without spending an attempt, not to be
		// claimed again before readyAt.
		w.metrics.handedBack.WithLabelValues(t.Queue, reason).Inc()
		log.get().Debug("jobs.limit.handed-back", "reason", reason, "tenant", t.Tenant, "until", readyAt)
		w.finalize(rec, log, frontend.Command{Kind: frontend.CmdRelease, ReadyAt: readyAt,
			Code: reason, Error: w.lim.explain(reason, t, w.cfg.ID)})
		return
	}
	defer w.lim.done(t)
	outcome, began := "", w.clock.Now()
	defer func() { w.logRun(log, outcome, began) }()
	cfg := def.Config()
	info := jobs.RunInfo{RunID: t.RunID, Job: t.Job, Queue: t.Queue, Attempt: t.Attempt,
		Actor: jobs.Actor{Tenant: t.Tenant, EnqueuedBy: t.EnqueuedBy}}
	span := w.startAttempt(t)
	outcome, failure := "lost", error(nil)
	defer func() { endAttempt(span, outcome, failure) }()

	// The attempt's deadline runs from the claim, before the body starts.
	var deadline <-chan time.Time
	if cfg.Timeout > 0 {
		tm := w.clock.NewTimer(cfg.Timeout)
		defer tm.Stop()
		deadline = tm.C()
	}
	ex, out, err := w.execution(t, def, info, rec, span)
	if err != nil {
		outcome, failure = "start-failed", err
		log.get().Error("jobs.run.start-failed", "err", err)
		// The claim lapses and the run is tried again; nothing was written.
		return
	}
	rec.ex.Store(ex)
	h := w.hold(t, ex)
	var o replay.Outcome
	select {
	case o = <-out:
	case <-deadline:
		// Cancel the body BEFORE failing the attempt: the failure makes the run claimable by
		// another worker, and a body still running past it would be a second copy of the run.
		cause := jobs.Errorf(jobs.CodeTimeout, "the attempt passed the job's timeout of %s", cfg.Timeout)
		outcome, failure = "failed", cause
		ex.Abort(cause)
		rec.landed = w.release(h)
		outcome = "timed-out"
		w.fail(rec, log, cfg, t, cause, "")
		lg := log.get() // made here: the goroutine below outlives the claim (runLog)
		w.background.Add(1)
		go func() {
			defer w.background.Done()
			select {
			case late := <-out:
				lg.Warn("jobs.timeout.abandoned", "outcome", late.Kind.String(), "timeout", cfg.Timeout)
			case <-ex.Exited():
				// The outcome is buffered before the body's goroutine exits, and select picks at
				// random between two ready cases: look for it once more, or a body that returned
				// after its deadline would go unreported.
				select {
				case late := <-out:
					lg.Warn("jobs.timeout.abandoned", "outcome", late.Kind.String(), "timeout", cfg.Timeout)
				default:
				}
			case <-w.hbStop:
				// Shutting down: a body that ignores its context cannot be waited for.
			}
		}()
		return
	}
	rec.landed = w.release(h)
	if cause := ex.Aborted(); cause != nil {
		// Cancelled, or the lease was lost: the run is no longer this worker's to write.
		outcome, failure = "aborted", cause
		log.get().Info("jobs.run.aborted", "cause", cause.Code, "outcome", o.Kind.String())
		outcome = "aborted"
		if o.Kind == replay.Suspended && o.Parked {
			ex.Evict()
		}
		return
	}
	if w.claimsAhead(def) {
		rec.ahead = s // the body has returned: its slot may go with the last record (ahead.go)
	}
	outcome = o.Kind.String()
	if o.Kind == replay.Failed || o.Kind == replay.Blocked {
		failure = o.Err
	}
	switch o.Kind {
	case replay.Completed:
		err := w.finalize(rec, log, frontend.Command{Kind: frontend.CmdComplete, Output: o.Result})
		if refusedAsSent(err) {
			// The engine refused the result itself (over its payload limit, say): the same code
			// returns the same result, so left at that the lease would lapse and the run be
			// handed back, to be refused again, forever. The attempt fails with the refusal
			// instead, under the job's policy (such codes are terminal).
			outcome, failure = replay.Failed.String(), err
			w.fail(rec, log, cfg, t, err, "")
			break
		}
		w.ended(rec, "completed", err)
	case replay.Failed:
		w.fail(rec, log, cfg, t, o.Err, o.Step)
	case replay.Blocked:
		log.get().Error("jobs.run.blocked", "err", o.Err)
		err := w.finalize(rec, log, frontend.Command{Kind: frontend.CmdBlock, Code: string(jobs.CodeOf(o.Err)), Error: o.Err.Error()})
		w.ended(rec, "blocked", err)
	case replay.Suspended:
		if o.Parked && w.cache != nil {
			p := &parked{ex: ex}
			// Add replaces an entry without the eviction callback: unwind a stale parked body of
			// the same run (a wake-up claimed before the first claim had parked) ourselves.
			if old, ok := w.cache.Peek(t.RunID); ok && old != p {
				w.cache.Remove(t.RunID)
			}
			w.cache.Add(t.RunID, p)
			if o.Waiting {
				// eventPoll bounds how long a wait stays parked here: an event may take days, and
				// a parked goroutine is memory held for it. Past the bound the body is unwound;
				// the wait itself is durable, and its wake-up replays the run.
				w.unparkAfter(t.RunID, p, cfg.EventPoll)
			}
		}
	}
}

// unparkAfter evicts a parked run after d unless it was resumed or evicted first.
func (w *Worker) unparkAfter(runID string, p *parked, d time.Duration) {
	tm := w.clock.NewTimer(d)
	w.background.Add(1)
	go func() {
		defer w.background.Done()
		select {
		case <-tm.C():
			if cur, ok := w.cache.Peek(runID); ok && cur == p {
				w.cache.Remove(runID)
			}
		case <-p.ex.Exited():
			tm.Stop()
		case <-w.hbStop:
			tm.Stop()
		}
	}()
}

// execution resumes the run's parked body when this worker has it and the history since is only
// its wake-up; otherwise it replays the run from its history.
func (w *Worker) execution(t frontend.Task, def jobs.Definition, info jobs.RunInfo, rec *recorder, span trace.Span) (*replay.Execution, <-chan replay.Outcome, error) {
	ctx := context.Background()
	if w.cache != nil {
		if p, ok := w.cache.Peek(t.RunID); ok {
			if p.taken.CompareAndSwap(false, true) {
				var events []history.Event
				var err error
				if n := len(t.Tail); n > 0 && t.Tail[0].Seq == p.ex.LastSeq()+1 && t.Tail[n-1].Seq == t.LastSeq {
					events = t.Tail // what the wake-up appended, handed over with the claim
				} else {
					events, err = rec.history(ctx, p.ex.LastSeq())
				}
				if err == nil {
					if out, ok := p.ex.Resume(events, rec, info, span); ok {
						w.cache.Remove(t.RunID)
						w.metrics.resumed.Inc()
						return p.ex, out, nil
					}
				}
				p.ex.Evict() // stale: evicted here, then replayed below
			}
			w.cache.Remove(t.RunID)
		}
	}
	var events []history.Event
	fresh := t.LastSeq == 1
	if !fresh {
		var err error
		if events, err = rec.history(ctx, 0); err != nil {
			return nil, nil, err
		}
		w.metrics.replayed.Inc()
	}
	// A fresh run's history is its RunStarted alone, and the task carries every field of it:
	// the replay starts from the task's input rather than from the event read back (a query per
	// run saved), or built here and decoded again (an encode and a decode per run saved).
	return replay.Start(withSpan(w.runContext(t), span), replay.Config{Def: def, Info: info, Clock: w.clock,
		Recorder: rec, Park: w.cache != nil, Go: w.goBody, Fresh: fresh, FreshInput: t.Input}, events)
}

// goBody runs a body on a goroutine kept from an earlier body that returned, or on a new one:
// see replay.Config.Go. Unbuffered, so a body is handed only to a goroutine waiting for one. The
// goroutines end with the worker's stop (hbStop closes once nothing runs; the parked bodies
// unwound after it end theirs).
func (w *Worker) goBody(f func()) {
	select {
	case w.bodies <- f:
	default:
		stop := w.hbStop
		go func() {
			for {
				f()
				select {
				case f = <-w.bodies:
				case <-stop:
					return
				}
			}
		}()
	}
}

func (w *Worker) fail(rec *recorder, log *runLog, cfg jobs.Config, t frontend.Task, cause error, step string) {
	d := cfg.Retry.Decide(t.Attempt, cause)
	cmd := frontend.Command{Kind: frontend.CmdFail, Attempt: t.Attempt, Code: string(jobs.CodeOf(cause)),
		Error: cause.Error(), Step: step, Stop: d.Stop}
	if d.Stop == "" {
		cmd.RetryAt = w.clock.Now().Add(d.RetryIn)
	} else if d.Stop == "terminal" {
		// Say why a run stopped at attempt 1 of 5.
		cmd.Error = verdict.Terminal(cause.Error(), t.Attempt, cfg.Retry.Attempts, cmd.Code)
	} else {
		cmd.Error = verdict.Exhausted(cause.Error(), t.Attempt, cfg.Retry.Attempts)
	}
	level := slog.LevelWarn
	if d.Stop != "" {
		level = slog.LevelError
	}
	log.get().Log(context.Background(), level, "jobs.attempt.failed", "code", cmd.Code, "class", d.Class,
		"step", step, "stop", d.Stop, "retry_in", d.RetryIn, "err", cause)
	err := w.finalize(rec, log, cmd)
	if d.Stop == "" && refusedAsSent(err) {
		// The engine refused the retry as sent (its time out of the engine's bounds, say, from
		// a clock far off the engine's). Left at that, the claim's lease lapses and the engine
		// hands the attempt back unspent, to fail and be refused again, forever. The failure is
		// reported once more without a retry, dead-lettering the run on this attempt, with the
		// refusal in its error; the run's unspent attempts are kept for an operator's retry.
		// A refusal of anything else (the claim is no longer held, the engine is unreachable)
		// says nothing of the retry, and changes nothing: the lease decides, as before.
		d.Stop, cmd.Stop, cmd.RetryAt, cmd.Code = "terminal", "terminal", time.Time{}, string(jobs.CodeOf(err))
		cmd.Error = verdict.Terminal(fmt.Sprintf("%s; the engine refused its retry: %s", cause.Error(), err),
			t.Attempt, cfg.Retry.Attempts, cmd.Code)
		log.get().Error("jobs.attempt.retry_refused", "code", jobs.CodeOf(cause), "step", step, "stop", d.Stop, "err", err)
		err = w.finalize(rec, log, cmd)
	}
	if d.Stop != "" {
		w.ended(rec, "failed", err)
	} else {
		w.ended(rec, "retried", err)
	}
}

// ended counts a claim's final record as the engine answered it, in the outcomes jobs_total
// documents: the record's own outcome when it landed (err nil); cancelled when the engine refused
// it because the run was cancelled meanwhile (X_ABORTED: the heartbeat had not told this worker
// yet); a lost lease (job_leases_lost_total) when it refused it because the claim is no longer
// this worker's (X_JOB_LEASE_LOST: the run is another claim's, and may complete there); and
// nothing when the answer says nothing of the run (the engine unreachable, a commit whose outcome
// is unknown) or the worker gave up on an engine it could not reach (send counted a lost lease
// then), which the engine's own count (source="engine") settles. A refused record counted under
// its outcome was a run counted completed that the engine cancelled, or completed twice.
func (w *Worker) ended(rec *recorder, outcome string, err error) {
	switch {
	case err == nil:
		w.metrics.done(rec.queue, outcome)
	case rec.gaveUp(err):
	case jobs.HasCode(err, jobs.CodeAborted):
		w.metrics.done(rec.queue, "cancelled")
	case jobs.HasCode(err, jobs.CodeJobLeaseLost):
		w.metrics.leasesLost.WithLabelValues(rec.queue).Inc()
	}
}

// gaveUp reports whether err, the error of the claim's final record, may be send's own verdict
// after the engine stayed unreachable (resend.go, holds: the worker stopped, or no renewal landed
// for a whole lease) rather than the engine's refusal. Both conditions still hold once send has
// returned, so one that does not hold now was not send's.
func (r *recorder) gaveUp(err error) bool {
	stop := r.holds(true)
	return stop != nil && stop.Code == jobs.CodeOf(err)
}

// refusedAsSent reports whether the engine refused a record for what its commands hold (a value
// out of bounds, an output over the payload limit or unreadable): sent again, as it is, it would
// be refused again. Any other error (the claim is no longer held, the engine did not answer) says
// nothing of the commands.
func refusedAsSent(err error) bool {
	switch jobs.CodeOf(err) {
	case jobs.CodeBadRequest, jobs.CodePayloadTooLarge, jobs.CodeEncoding:
		return true
	}
	return false
}

// finalize records the command that ends a claim. The error is logged here, and returned for
// the callers that act on a refusal of what they sent (refusedAsSent).
func (w *Worker) finalize(rec *recorder, log *runLog, cmd frontend.Command) error {
	if rec.ahead != nil {
		rec.ahead.give()
	}
	_, err := rec.send(context.Background(), []frontend.Command{cmd}, true)
	if err != nil {
		log.get().Warn("jobs.record.failed", "command", cmd.Kind, "err", err)
	}
	return err
}

// recorder is the replay.Recorder of one claim. Its sends ride out an engine that cannot be
// reached (see resend.go).
type recorder struct {
	fe     frontend.Frontend
	w      *Worker
	runID  string
	queue  string
	fence  int64
	worker string
	token  string
	slot   string
	// ahead is the claim's execution slot when it is given back at the last record (ahead.go).
	ahead *slot
	// claimedAt starts the lease window before the claim is tracked for heartbeats; landed is
	// the last renewal that landed when tracking ended (the final record's window).
	claimedAt time.Time
	ex        atomic.Pointer[replay.Execution]
	mu        sync.Mutex
	seq       int64
	landed    time.Time
}

// Record sends the body's commands; see send.
func (r *recorder) Record(ctx context.Context, cmds []frontend.Command) (frontend.RecordResponse, error) {
	return r.send(ctx, cmds, false)
}

// logRun writes the claim's one readable line at info: how it ended and how long it took
// (on the worker's clock). Nothing when the claim ended before running the body.
func (w *Worker) logRun(log *runLog, outcome string, began time.Time) {
	if outcome == "" || w.cfg.QuietRuns {
		return
	}
	took := w.clock.Now().Sub(began).Round(time.Millisecond)
	// Typed attributes (LogAttrs), not key-value pairs: the same line, without boxing each
	// value and building a slice of them per run.
	if log.l != nil {
		log.l.LogAttrs(context.Background(), slog.LevelInfo, "jobs.run", slog.String("outcome", outcome), slog.Duration("took", took))
		return
	}
	// The same line as through runLog.get, without deriving a logger for it.
	w.log.LogAttrs(context.Background(), slog.LevelInfo, "jobs.run", slog.String("run", log.run), slog.String("job", log.job),
		slog.Int("attempt", log.attempt), slog.String("outcome", outcome), slog.Duration("took", took))
}

// runLog is a claim's logger, derived from the worker's on first use: most claims log only
// their one line (logRun), and deriving a logger per claim (slog's With formats its attributes
// at once, whether or not a line follows) was a measurable part of a no-op job's CPU. Used
// from the claim's own goroutine; a goroutine that outlives the claim takes get() first.
type runLog struct {
	w        *Worker
	run, job string
	attempt  int
	l        *slog.Logger
}

func (l *runLog) get() *slog.Logger {
	if l.l == nil {
		l.l = l.w.log.With("run", l.run, "job", l.job, "attempt", l.attempt)
	}
	return l.l
}
