package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// Timer keys, one per purpose; a run has at most one timer of each at a time.
const (
	timerSleep = "sleep:"
	timerWait  = "wait:"
	timerRetry = "retry"
	timerHand  = "release"
)

type commitReq struct {
	m        store.Mutation
	afterSeq int64
	done     chan commitRes
	// arrived and release are what the record's post-commit work needs besides m (afterCommit),
	// kept with it for the committer to do that work when the record's caller has left.
	arrived time.Time
	release *frontend.Command // the hand-back that ends the record, if it ends so
	// state hands the post-commit work of a record that landed to exactly one of its caller
	// (reqAnswered) and the committer (reqLeft): see answer.
	state atomic.Int32
	// left is set by a caller that left before the answer: done once the committer is done.
	left *handOver
}

// commitReq.state.
const (
	reqWaiting  int32 = iota // queued or committing, its caller waiting for the answer
	reqAnswered              // the committer answered: the caller does the post-commit work
	reqLeft                  // the caller left: the committer does it
)

// commitReqs recycles the records of answered group commits: a record with its answer channel
// was the largest allocation per step. A record is put back only once its answer was received;
// one abandoned by its caller (ctx done) is left to the collector, as the committer may still
// answer it.
var commitReqs = sync.Pool{New: func() any { return &commitReq{done: make(chan commitRes, 1)} }}

type commitRes struct {
	res store.MutationResult
	err error
}

// Record implements frontend.Frontend: it turns a run's commands into events and a transition
// and commits them in a group commit shared with other runs' records.
func (e *Engine) Record(ctx context.Context, req frontend.RecordRequest) (frontend.RecordResponse, error) {
	if err := e.checkLease(ctx, req.RunID, req.Fence, req.WorkerID, req.LeaseToken); err != nil {
		return frontend.RecordResponse{}, err
	}
	if req.AfterSeq < 1 {
		return frontend.RecordResponse{}, jobs.Errorf(jobs.CodeBadRequest, "record for run %s: after_seq %d; a run's history starts at seq 1", req.RunID, req.AfterSeq)
	}
	arrived := time.Now() // wall clock: the step-commit latency histogram measures real work
	now := e.clock.Now()
	if err := e.checkBeforeEffects(ctx, req, now); err != nil {
		return frontend.RecordResponse{}, err
	}
	req, err := e.effects(ctx, req)
	if err != nil {
		return frontend.RecordResponse{}, err
	}
	m, err := e.mutation(req, now)
	if err != nil {
		return frontend.RecordResponse{}, err
	}
	m.AfterSeq = req.AfterSeq
	r := commitReqs.Get().(*commitReq)
	r.m, r.afterSeq, r.arrived = m, req.AfterSeq, arrived
	if n := len(req.Commands); req.Commands[n-1].Kind == frontend.CmdRelease {
		r.release = &req.Commands[n-1]
	}
	if req.Retry {
		if resp, ok, err := e.landedAnswer(ctx, req, m); err != nil || ok {
			return resp, err
		}
	}
	// Checked after the resend's look for its own events: a resend that landed names what the
	// history now holds, and is answered, not refused.
	l, err := e.ledgerAt(ctx, req.RunID, req.AfterSeq)
	if err == nil {
		err = checkLedger(req.RunID, l, req.Commands)
		job, started := l.job, l.started
		l.mu.Unlock()
		if err == nil && e.exhaust(ctx, job, req.Commands) {
			// The engine, not the worker, holds the attempt ceiling: rebuild what the record means.
			if m, err = e.mutation(req, now); err == nil {
				m.AfterSeq = req.AfterSeq
				r.m = m
			}
		}
		sinceRunStart(r.m, req.Commands, started)
	}
	if err != nil {
		if req.Retry && jobs.HasCode(err, jobs.CodeHistoryStale) {
			// The first send landed after this resend looked for it.
			if resp, ok, lerr := e.landedAnswer(ctx, req, r.m); lerr != nil || ok {
				return resp, lerr
			}
		}
		return frontend.RecordResponse{}, e.claimVerdict(ctx, req, err)
	}
	e.handing.RLock()
	e.mu.Lock()
	started, ranOnce := e.started, e.ranOnce
	e.mu.Unlock()
	if !started {
		e.handing.RUnlock()
		if !ranOnce {
			return frontend.RecordResponse{}, jobs.Errorf(jobs.CodeDraining, "the engine was never started: call Engine.Start (an fx app includes engine.Module) before its workers record")
		}
		return frontend.RecordResponse{}, jobs.Errorf(jobs.CodeDraining, "the engine is stopping")
	}
	select {
	case e.commits <- r: // queued before Stop can end the loops, which answer what they queued
	case <-ctx.Done():
		e.handing.RUnlock()
		return frontend.RecordResponse{}, ctx.Err()
	}
	e.handing.RUnlock()
	if e.owed.Add(-1) == 0 {
		// The last of the runs the previous commit answered is back (overlap.go, gather).
		select {
		case e.back <- struct{}{}:
		default:
		}
	}
	if n := e.cfg.OverlapAt; n > 0 && len(e.commits) >= n {
		// Enough records wait for a second commit in flight (overlapLoop sleeps until then).
		select {
		case e.full <- struct{}{}:
		default:
		}
	}
	var out commitRes
	select {
	case out = <-r.done:
	case <-ctx.Done():
		// The commit may still land. Its post-commit work (counting it above all) is the
		// committer's from here (answer), and the worker's retry (same AfterSeq) finds the
		// record through recovery, answered once that work is done (landedAnswer). Registered
		// before the hand-over, so that a retry that finds the record landed finds it too.
		h := e.metrics.handOvers.add(req.RunID)
		r.left = h
		if r.state.CompareAndSwap(reqWaiting, reqLeft) {
			return frontend.RecordResponse{}, jobs.Wrap(jobs.CodeCommitUnknown, ctx.Err(), "run %s", req.RunID)
		}
		// Answered meanwhile: the answer is in r.done, or on its way, and the work is ours.
		h.finish()
		out = <-r.done
	}
	// Answered: the committer is done with r (it never touches a record after its answer).
	m, release := r.m, r.release
	*r = commitReq{done: r.done}
	commitReqs.Put(r)
	if out.err != nil {
		return frontend.RecordResponse{}, out.err
	}
	if out.res.Err != nil {
		if req.Retry && (jobs.HasCode(out.res.Err, jobs.CodeHistoryStale) || jobs.HasCode(out.res.Err, jobs.CodeJobLeaseLost)) {
			// The first send was still committing when this resend looked for it, and landed
			// before it: a resend is answered with what landed, not refused. A first send that
			// ended the claim (a final record) leaves the run no longer running, which the
			// store refuses as a lost lease rather than a stale history.
			if resp, ok, err := e.landedAnswer(ctx, req, m); err != nil || ok {
				return resp, err
			}
		}
		return frontend.RecordResponse{}, out.res.Err
	}
	e.afterCommit(ctx, &m, release, arrived, out.res)
	return frontend.RecordResponse{Appended: out.res.Appended, LastSeq: out.res.Run.LastSeq, State: string(out.res.Run.State)}, nil
}

// afterCommit is the work a record that landed calls for once committed: the run's ledger
// continued, a finished run's parent told and its line logged, a hand-back noted, the record
// counted (jobs_total, jobs_run_duration_seconds, jobs_step_commit_seconds), the run's slots
// released, and the timer service and the pollers woken.
//
// It is done once per landed record, by whoever holds the record when its commit is answered:
// Record for a caller that waited for the answer, the committer (answer) for one that left first
// (a worker's connection dropped mid-commit: X_COMMIT_UNKNOWN). A resend answered with what its
// first send landed (landedAnswer) does none of it: the first send's commit did, whether its
// answer reached the worker or not. Done there, a run whose final record was confirmed only to
// its resend was never counted, logged, told to its parent or freed of its slots.
func (e *Engine) afterCommit(ctx context.Context, m *store.Mutation, release *frontend.Command, arrived time.Time, res store.MutationResult) {
	e.settle(m.RunID, res.Appended)
	if res.Run.State.Finished() {
		e.childFinished(ctx, res.Run)
		e.logFinished(res.Run)
	}
	if release != nil {
		e.releasedByWorker(m.RunID, res.Run.Queue, *release)
	}
	e.metrics.recorded(*m, res.Run, arrived)
	e.settled(res.Run.State)
	if len(m.Timers) > 0 {
		e.timers.Kick()
	}
	if res.Run.State != store.StateRunning {
		e.releaseSlots(ctx, res.Run)
	}
	if m.State == store.StateReady {
		e.matching.Wake()
	}
}

// answer hands r its commit's outcome. A caller still waiting takes it and does the post-commit
// work; for a caller that left (reqLeft) the committer does that work here, apart from the
// batch's other answers, so a record that landed is settled and counted once whether or not
// its answer reached the worker. ctx is the committer's, which no caller ends.
func (e *Engine) answer(ctx context.Context, r *commitReq, out commitRes) {
	if r.state.CompareAndSwap(reqWaiting, reqAnswered) {
		r.done <- out
		return
	}
	h := r.left
	if out.err != nil || out.res.Err != nil {
		h.finish() // nothing landed: nothing to do
		return
	}
	// Counted in the engine's WaitGroup, which the committer's own goroutine holds above zero:
	// Stop waits for this work as for the commit.
	e.wg.Add(1)
	go e.afterLeft(ctx, r, out.res)
}

// afterLeft is afterCommit for a record whose caller left (answer). A function of its own rather
// than a closure: a closure over the answer moved it to the heap for every record answered.
func (e *Engine) afterLeft(ctx context.Context, r *commitReq, res store.MutationResult) {
	defer e.wg.Done()
	defer r.left.finish()
	e.afterCommit(ctx, &r.m, r.release, r.arrived, res)
}

// handOvers are the records whose caller left before their commit was answered, by run, until
// the committer has done their post-commit work (answer). A resend that finds its first send
// landed waits for it (landedAnswer): its answer then follows that record's counting and
// settling, as the first send's answer would have.
type handOvers struct {
	mu   sync.Mutex
	runs map[string]*handOver
}

// handOver is the post-commit work owed for a run's records whose caller left: n records, done
// when all are.
type handOver struct {
	hs   *handOvers
	run  string
	n    int
	done chan struct{}
}

// handOverWait bounds a resend's wait for its first send's post-commit work. That work takes a
// few store calls; the bound is for a record drained unanswered at a stop, which never finishes.
const handOverWait = 2 * time.Second

func (hs *handOvers) add(run string) *handOver {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.runs == nil {
		hs.runs = map[string]*handOver{}
	}
	h := hs.runs[run]
	if h == nil {
		h = &handOver{hs: hs, run: run, done: make(chan struct{})}
		hs.runs[run] = h
	}
	h.n++
	return h
}

func (h *handOver) finish() {
	h.hs.mu.Lock()
	defer h.hs.mu.Unlock()
	if h.n--; h.n == 0 {
		close(h.done)
		delete(h.hs.runs, h.run)
	}
}

// wait returns once no record of run is owed its post-commit work, ctx is done, or
// handOverWait has passed.
func (hs *handOvers) wait(ctx context.Context, run string) {
	hs.mu.Lock()
	h := hs.runs[run]
	hs.mu.Unlock()
	if h == nil {
		return
	}
	t := time.NewTimer(handOverWait)
	defer t.Stop()
	select {
	case <-h.done:
	case <-ctx.Done():
	case <-t.C:
	}
}

// checkBeforeEffects refuses, before effects carries anything out, a record that publishes or
// enqueues and that the checks after the effects would refuse: a refused record changes nothing,
// and a child enqueued for a record that is then refused would be left behind (its parent's call
// was never recorded). The record's own checks run on a copy whose effects are marked done; the
// history's (names used, after_seq) run too, except for a resend (Retry), whose first send may
// have landed: it must be answered with what landed, and its effects, idempotent per call name
// (callID), were carried out by that first send already.
func (e *Engine) checkBeforeEffects(ctx context.Context, req frontend.RecordRequest, now time.Time) error {
	first := -1
	for i, c := range req.Commands {
		if c.Kind == frontend.CmdPublish || c.Kind == frontend.CmdEnqueue {
			first = i
			break
		}
	}
	if first < 0 {
		return nil
	}
	dry := req
	dry.Commands = append([]frontend.Command(nil), req.Commands...)
	for i := first; i < len(dry.Commands); i++ {
		c := &dry.Commands[i]
		if c.Kind == frontend.CmdAwaitChild && (c.Effect == nil || c.Effect.RunID == "") {
			// Refused as effects refuses it: left to the dry mutation, such an await read as
			// one the engine failed to carry out (X_INVARIANT), for a worker's bad record.
			return noChild(req.RunID, c.Name)
		}
		if c.Kind != frontend.CmdPublish && c.Kind != frontend.CmdEnqueue {
			continue
		}
		if c.Effect == nil {
			if c.Kind == frontend.CmdEnqueue {
				return noEnqueue(req.RunID, c.Name)
			}
			c.Effect = &frontend.Effect{}
		} else {
			out := *c.Effect
			c.Effect = &out
		}
		c.Effect.EventID, c.Effect.RunID = "(not yet)", "(not yet)"
	}
	if _, err := e.mutation(dry, now); err != nil {
		return err
	}
	if req.Retry {
		return nil
	}
	l, err := e.ledgerAt(ctx, req.RunID, req.AfterSeq)
	if err == nil {
		err = checkLedger(req.RunID, l, req.Commands)
		l.mu.Unlock()
	}
	if err != nil {
		return e.claimVerdict(ctx, req, err)
	}
	// Each effect's own checks, for the effects a refused later one would leave behind
	// (effects_check.go). Not for a resend: its first send passed them (it would have been
	// refused, not resent) and carried out its effects.
	return e.checkEffects(ctx, req, first, now)
}

// mutation validates commands and builds the events and transition they mean.
func (e *Engine) mutation(req frontend.RecordRequest, now time.Time) (store.Mutation, error) {
	m := store.Mutation{RunID: req.RunID, Fence: req.Fence, Now: now}
	if len(req.Commands) == 0 {
		return m, jobs.Errorf(jobs.CodeBadRequest, "record for run %s has no commands", req.RunID)
	}
	if len(req.Commands) > frontend.MaxRecordCommands {
		return m, jobs.Errorf(jobs.CodeBadRequest, "record for run %s carries %d commands; the limit is %d", req.RunID, len(req.Commands), frontend.MaxRecordCommands)
	}
	final := false
	for i := range req.Commands {
		if err := checkCommand(req.RunID, i, &req.Commands[i], now); err != nil {
			return m, err
		}
		c := req.Commands[i]
		if final {
			return m, jobs.Errorf(jobs.CodeBadRequest, "run %s: command %d (%s) follows one that ends the claim", req.RunID, i, c.Kind)
		}
		if len(c.Output) > e.cfg.MaxPayload {
			return m, jobs.Errorf(jobs.CodePayloadTooLarge, "run %s: %s %q output is %d bytes, the limit is %d", req.RunID, c.Kind, c.Name, len(c.Output), e.cfg.MaxPayload)
		}
		switch c.Kind {
		case frontend.CmdStep:
			if c.Name == "" {
				return m, jobs.Errorf(jobs.CodeBadRequest, "run %s: a step needs a name", req.RunID)
			}
			m.Events = append(m.Events, history.NewStep(now, history.StepCompleted{StepName: c.Name, Output: c.Output, Parallel: c.Parallel}))
		case frontend.CmdStepFailed:
			m.Events = append(m.Events, history.New(now, history.StepFailed{StepName: c.Name, Code: c.Code, Error: c.Error, RetryAfter: c.RetryAfter, Codes: c.Codes, Parallel: c.Parallel}))
		case frontend.CmdSleep:
			final = true
			m.Events = append(m.Events, history.New(now, history.TimerStarted{TimerName: c.Name, WakeAt: c.WakeAt}))
			fired := history.New(c.WakeAt, history.TimerFired{TimerName: c.Name, DueAt: c.WakeAt})
			m.State, m.Sticky = store.StateSuspended, c.Sticky
			m.Timers = append(m.Timers, store.Timer{Key: timerSleep + c.Name, DueAt: c.WakeAt, Fire: &fired})
		case frontend.CmdWait:
			final = true
			if c.Event == "" {
				return m, jobs.Errorf(jobs.CodeBadRequest, "run %s: wait %q names no event", req.RunID, c.Name)
			}
			m.Events = append(m.Events, history.New(now, history.EventWaitStarted{WaitName: c.Name, Event: c.Event, Match: c.Match, TimeoutAt: c.TimeoutAt}))
			timedOut := history.New(c.TimeoutAt, history.EventWaitTimedOut{WaitName: c.Name})
			m.State, m.Sticky = store.StateSuspended, c.Sticky
			m.Timers = append(m.Timers, store.Timer{Key: timerWait + c.Name, DueAt: c.TimeoutAt, Fire: &timedOut})
			m.Wait = &store.Wait{Name: c.Name, Event: c.Event, Match: c.Match, LookbackFrom: e.lookbackFrom(c.Lookback, now)}
		case frontend.CmdComplete:
			final = true
			m.Events = append(m.Events, history.NewCompleted(now, history.RunCompleted{Result: c.Output}))
			m.State, m.Result = store.StateCompleted, c.Output
		case frontend.CmdFail:
			final = true
			m.Events = append(m.Events, history.New(now, history.AttemptFailed{Attempt: c.Attempt, Code: c.Code,
				Error: c.Error, Step: c.Step, Stop: c.Stop, RetryAt: c.RetryAt}))
			m.ErrorCode, m.Error, m.StopReason = c.Code, c.Error, c.Stop
			if c.Stop != "" {
				code, msg := c.Code, c.Error
				if c.Stop == stopExhausted {
					// The run's verdict is X_JOB_MAX_ATTEMPTS; the attempt's own failure (kept
					// as is in AttemptFailed) is its last error.
					code, msg = string(jobs.CodeJobMaxAttempts), lastError(c)
					m.ErrorCode, m.Error = code, msg
				}
				m.Events = append(m.Events, history.New(now, history.RunFailed{Attempt: c.Attempt, Code: code, Error: msg, Stop: c.Stop}))
				m.State = store.StateFailed
			} else {
				m.State, m.Attempt = store.StateDelayed, c.Attempt+1
				m.Timers = append(m.Timers, store.Timer{Key: timerRetry, DueAt: c.RetryAt})
			}
		case frontend.CmdBlock:
			final = true
			m.Events = append(m.Events, history.New(now, history.RunBlocked{Code: c.Code, Error: c.Error}))
			m.State, m.ErrorCode, m.Error = store.StateBlocked, c.Code, c.Error
		case frontend.CmdRelease:
			final = true
			if c.ReadyAt.After(now) {
				m.State = store.StateDelayed
				m.Timers = append(m.Timers, store.Timer{Key: timerHand, DueAt: c.ReadyAt})
			} else {
				m.State, m.ReadyAt = store.StateReady, now
			}
		case frontend.CmdAwaitChild:
			final = true
			if err := e.awaitChildMutation(&m, req.RunID, c, now); err != nil {
				return m, err
			}
		case frontend.CmdVersion:
			m.Events = append(m.Events, history.New(now, history.VersionMarked{ChangeID: c.Name, Version: c.Version}))
		case frontend.CmdPublish, frontend.CmdEnqueue:
			ev, err := effectEvent(req.RunID, c, now)
			if err != nil {
				return m, err
			}
			m.Events = append(m.Events, ev)
		default:
			return m, jobs.Errorf(jobs.CodeBadRequest, "run %s: unknown command %q", req.RunID, c.Kind)
		}
	}
	return m, nil
}

// commitLoop is one committer: it takes every record waiting and applies them in one store
// call, so concurrent runs share a commit. While its transaction is in flight, new records queue
// up for the next one: the batch grows with the load and costs no added latency at low load.
func (e *Engine) commitLoop(ctx context.Context) {
	batch := make([]*commitReq, 0, e.cfg.MaxBatch)
	var scratch []store.Mutation
	for {
		batch = batch[:0]
		select {
		case r := <-e.commits:
			batch = append(batch, r)
		case <-ctx.Done():
			// Drain what was queued before the stop, so no caller waits forever.
			for {
				select {
				case r := <-e.commits:
					e.answer(ctx, r, commitRes{err: jobs.Errorf(jobs.CodeDraining, "the engine is stopping")})
				default:
					return
				}
			}
		}
		e.commit(context.WithoutCancel(ctx), e.fillBatch(batch), &scratch)
	}
}

// fillBatch adds to batch what is already queued, without waiting, up to MaxBatch: a batch
// takes every record that arrived while the previous commit ran.
func (e *Engine) fillBatch(batch []*commitReq) []*commitReq {
	for len(batch) < e.cfg.MaxBatch {
		select {
		case r := <-e.commits:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// commit applies batch in one store call. scratch is the committer's own slice for the
// mutations, reused from batch to batch (a Mutation is large; one slice per batch was garbage
// proportional to the records); nil makes one.
func (e *Engine) commit(ctx context.Context, batch []*commitReq, scratch *[]store.Mutation) {
	var ms []store.Mutation
	if scratch != nil {
		ms = (*scratch)[:0]
	}
	for _, r := range batch {
		ms = append(ms, r.m)
	}
	if scratch != nil {
		defer func() {
			clear(ms) // no committed record's events stay reachable from the scratch slice
			*scratch = ms[:0]
		}()
	}
	began := time.Now()
	results, err := e.store.RunApply(ctx, ms)
	e.metrics.batchSize.Observe(float64(len(batch)))
	took := time.Since(began)
	e.metrics.batchSeconds.Observe(took.Seconds())
	if err == nil {
		// Before any answer goes out: the runs still running will each send a next record,
		// which the committer may wait for (overlap.go, gather).
		owed := 0
		for i := range results {
			if results[i].Err == nil && results[i].Run.State == store.StateRunning {
				owed++
			}
		}
		e.owed.Store(int64(owed))
		e.lastCommit.Store(int64(took))
		for i, r := range batch {
			e.answer(ctx, r, commitRes{res: results[i]})
		}
		return
	}
	// The batch's outcome is unknown: the transaction may have committed before the error
	// reached us. Settle each record by reading its history rather than guessing, so a step is
	// neither lost nor recorded twice.
	e.log.Warn("jobs.commit.unknown", "records", len(batch), "err", err)
	e.metrics.commitUnknown.Inc()
	for _, r := range batch {
		res, rerr := e.recover(ctx, r)
		e.answer(ctx, r, commitRes{res: res, err: rerr})
	}
}

// recover settles one record after a failed group commit: if its events are in the history after
// the seq the worker knew, it committed; otherwise it is applied again, alone.
func (e *Engine) recover(ctx context.Context, r *commitReq) (store.MutationResult, error) {
	landed, err := e.landed(ctx, r.m, r.afterSeq)
	if err != nil {
		return store.MutationResult{}, jobs.Wrap(jobs.CodeCommitUnknown, err, "run %s: the commit's outcome is unknown and the history could not be read", r.m.RunID)
	}
	if landed != nil {
		run, err := e.store.RunGet(ctx, r.m.RunID)
		if err != nil {
			return store.MutationResult{}, jobs.Wrap(jobs.CodeCommitUnknown, err, "run %s", r.m.RunID)
		}
		return store.MutationResult{Appended: landed, Run: run}, nil
	}
	results, err := e.store.RunApply(ctx, []store.Mutation{r.m})
	if err != nil {
		return store.MutationResult{}, jobs.Wrap(jobs.CodeCommitUnknown, err, "run %s: retrying the commit", r.m.RunID)
	}
	return results[0], nil
}

// landed returns the events of r as the history holds them after r.afterSeq, or nil when they
// are not there.
func (e *Engine) landed(ctx context.Context, m store.Mutation, afterSeq int64) ([]history.Event, error) {
	if len(m.Events) == 0 {
		// A record without events (a hand-back) leaves nothing in the history to find: it landed
		// if the claim it was sent under no longer holds the run. Read from the history, every
		// such resend looked landed on a store that answers an empty read with an empty slice,
		// and the run stayed running until its lease lapsed.
		run, err := e.store.RunGet(ctx, m.RunID)
		if err != nil {
			return nil, err
		}
		if run.State == store.StateRunning && run.Fence == m.Fence {
			return nil, nil
		}
		return []history.Event{}, nil
	}
	events, err := e.store.HistoryRead(ctx, m.RunID, afterSeq, 0)
	if err != nil {
		return nil, err
	}
	if len(events) < len(m.Events) {
		return nil, nil
	}
	for i, want := range m.Events {
		got := events[i]
		if got.Kind != want.Kind || got.Name != want.Name || string(got.Data) != string(want.Data) {
			return nil, nil
		}
	}
	return events, nil
}

// landedAnswer answers a resend whose first send is already in the history (ok), as the first
// send's answer would have.
func (e *Engine) landedAnswer(ctx context.Context, req frontend.RecordRequest, m store.Mutation) (frontend.RecordResponse, bool, error) {
	landed, err := e.landed(ctx, m, req.AfterSeq)
	if err != nil || landed == nil {
		return frontend.RecordResponse{}, false, err
	}
	// The record's post-commit work is its first send's (afterCommit), none of it this answer's;
	// a first send whose caller left has it done by the committer, waited for here.
	e.metrics.handOvers.wait(ctx, req.RunID)
	run, err := e.store.RunGet(ctx, req.RunID)
	if err != nil {
		return frontend.RecordResponse{}, false, err
	}
	return frontend.RecordResponse{Appended: landed, LastSeq: run.LastSeq, State: string(run.State)}, true, nil
}

// logFinished is the engine's one readable line per finished run (Config.LogRuns).
func (e *Engine) logFinished(r store.Run) {
	if !e.cfg.LogRuns {
		return
	}
	args := []any{"run", r.ID, "job", r.Job, "queue", r.Queue, "state", string(r.State), "attempt", r.Attempt,
		"took", r.FinishedAt.Sub(r.CreatedAt).Round(time.Millisecond)}
	if r.ErrorCode != "" {
		args = append(args, "code", r.ErrorCode)
	}
	if r.StopReason != "" {
		args = append(args, "stop", r.StopReason)
	}
	e.log.Info("jobs.run.finished", args...)
}
