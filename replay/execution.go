package replay

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
)

// Recorder applies an execution's commands to its run. The worker implements it over the
// Frontend, binding the run id, the claim's fence and the last known seq.
type Recorder interface {
	Record(ctx context.Context, cmds []frontend.Command) (frontend.RecordResponse, error)
}

// OutcomeKind is how an execution's current claim ended.
type OutcomeKind int

const (
	// Completed: the body returned a result.
	Completed OutcomeKind = iota + 1
	// Failed: the body returned an error (or panicked, or broke a rule such as
	// X_STEP_DUPLICATE); the attempt failed.
	Failed
	// Suspended: the body reached a sleep or a wait that was recorded; the run is suspended.
	Suspended
	// Blocked: the code no longer replays the history (X_REPLAY_DIVERGED).
	Blocked
	// EndOfHistory: in check mode, the body replayed every recorded call and reached a live one.
	EndOfHistory
)

func (k OutcomeKind) String() string {
	return [...]string{"?", "completed", "failed", "suspended", "blocked", "end-of-history"}[k]
}

// Outcome is what an execution reports at the end of a claim.
type Outcome struct {
	Kind   OutcomeKind
	Result []byte
	Err    error
	// Step is the step whose error the body returned, when it did.
	Step string
	// Parked is true on Suspended when the body is parked and can be resumed with Resume.
	Parked bool
	// Waiting is true on Suspended when the body waits for an event (not a sleep).
	Waiting bool
}

// Config sets up an execution.
type Config struct {
	Def  jobs.Definition
	Info jobs.RunInfo
	// Clock times sleeps, wait timeouts and step timeouts. Defaults to the wall clock.
	Clock clock.Clock
	// Recorder applies live calls. Nil selects check mode: the first live call ends the
	// execution with EndOfHistory.
	Recorder Recorder
	// Park keeps a suspended body's goroutine parked, for Resume, instead of unwinding it.
	Park bool
	// Go starts the body's goroutine; nil starts a new one. The worker passes goroutines kept
	// between bodies: a body's durable calls reach the engine through the recorder, deep enough
	// that a fresh goroutine grew its stack on every claim. A body that unwinds (a suspension
	// not parked, a verdict) ends its goroutine whichever started it.
	Go func(func())
	// Fresh starts a run whose history is its RunStarted alone, with FreshInput as its input,
	// and Start's events empty. A fresh claim carries every field of that event, and the worker
	// built it only for Start to decode it again, on every claim of a new run.
	Fresh      bool
	FreshInput []byte
}

// Execution is one run's body running against its history. Its durable calls must be made from
// the body's own goroutine (they are sequential by nature: their order is the replay key).
type Execution struct {
	cfg    Config
	ctx    *jobs.Ctx
	cancel context.CancelCauseFunc
	// recCtx is ctx without its cancellation, made once (and again on a resume, with the new
	// claim's span): a record outlives a cancelled body (the commit may land), and every step
	// records under it.
	recCtx context.Context

	// Owned by the body goroutine.
	cs         calls
	pos        int
	names      map[string]bool
	rec        Recorder
	out        chan Outcome
	failedStep string
	exiting    bool
	// exitedIn is the step whose function, run in line, ended the body's goroutine with
	// runtime.Goexit (run reports it).
	exitedIn string

	// span is the current claim's span (trace.go); owned by the body goroutine once it runs.
	span trace.Span

	aborted atomic.Pointer[jobs.Error]
	// stepping is set while a step's function runs (a Step, not a parallel one), steppingName
	// being that step's, written before the flag is set: the body waits for the function, so a
	// durable call meanwhile comes from inside it (nested.go). A flag and a string rather than
	// a pointer to the name, which would cost every step an allocation.
	stepping     atomic.Bool
	steppingName string
	// running counts the parallel steps whose functions run; bodyG is the body goroutine's id,
	// taken at its first jobs.Go (nested.go).
	running atomic.Int32
	bodyG   atomic.Uint64
	lastSeq atomic.Int64
	resume  chan resumeMsg
	exited  chan struct{}

	// parked is the index of the call the body is parked on, or -1.
	mu     sync.Mutex
	parked int

	// Parallel steps (parallel.go). recMu serialises the execution's records, the body's and
	// its parallel steps', so each is built on the seq the one before it left. csMu guards cs
	// while parallel steps are in flight; it is held only to read cs or to fold a record's
	// answer into it, never across a record's round trip, so starting, replaying or finishing
	// a step never waits for another's record.
	recMu    sync.Mutex
	one      [1]frontend.Command // recordOne's slice, under recMu
	csMu     sync.Mutex
	inflight sync.WaitGroup
	pmu      sync.Mutex
	pend     []*pendingStep
	claimed  map[string]bool // recorded parallel steps the body has started (body goroutine)
	// versions are the change points reached so far (version.go; body goroutine).
	versions map[string]int
	// handled are the failed steps the body went on past, to go out ahead of the next record
	// (failed.go); under recMu. queued is its length, read without the lock.
	handled []frontend.Command
	queued  atomic.Int32
}

type resumeMsg struct {
	evict  bool
	events []history.Event
	rec    Recorder
	out    chan Outcome
	info   jobs.RunInfo
	span   trace.Span
}

// Start runs def's body against events (the run's history so far) in a new goroutine. The
// returned channel receives the outcome of this claim.
func Start(parent context.Context, cfg Config, events []history.Event) (*Execution, <-chan Outcome, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	e := &Execution{
		cfg:    cfg,
		rec:    cfg.Recorder,
		out:    make(chan Outcome, 1),
		resume: make(chan resumeMsg),
		exited: make(chan struct{}),
		parked: -1,
	}
	if cfg.Fresh {
		if len(events) > 0 {
			return nil, nil, jobs.Errorf(jobs.CodeInvariant, "run %s: a fresh start given %d events", cfg.Info.RunID, len(events))
		}
		e.cs.started, e.cs.input, e.cs.lastSeq = true, cfg.FreshInput, 1
	}
	if err := e.cs.apply(events); err != nil {
		return nil, nil, err
	}
	if n := len(e.cs.list) + len(e.cs.futures); n > 8 {
		// Every recorded call's name is checked for uniqueness as the body replays it: size the
		// set once for a long history rather than rehashing it as it grows.
		e.names = make(map[string]bool, n)
	}
	if !e.cs.started {
		return nil, nil, jobs.Errorf(jobs.CodeInvariant, "run %s: history has no RunStarted event", cfg.Info.RunID)
	}
	e.lastSeq.Store(e.cs.lastSeq)
	if span := trace.SpanFromContext(parent); span.IsRecording() {
		e.span = span
		span.SetAttributes(AttrHistoryCalls.Int(len(e.cs.list)))
	}
	ctx, cancel := context.WithCancelCause(parent)
	e.cancel = cancel
	e.ctx = jobs.NewCtx(ctx, cfg.Info, (*runtimeImpl)(e))
	e.recCtx = context.WithoutCancel(e.ctx)
	out := e.out
	if cfg.Go != nil {
		cfg.Go(e.run)
	} else {
		go e.run()
	}
	return e, out, nil
}

func (e *Execution) run() {
	defer close(e.exited)
	returned := false
	defer func() {
		if returned || e.exiting {
			return
		}
		r := recover()
		e.inflight.Wait()
		if r == nil {
			// runtime.Goexit from the body, or from a step's function run in line (a t.FailNow in
			// a body under test, say): not a panic, so nothing to recover, but the body did not
			// return either. Unreported, the claim had no outcome: the worker waited for it until
			// the attempt's timeout (forever without one) and replay.Check never returned. It
			// fails the attempt as a panic does, unclassified, as a step ending its own goroutine
			// already did (panic.go).
			what := "the body"
			if e.exitedIn != "" {
				what = fmt.Sprintf("step %q", e.exitedIn)
			}
			e.finish(Outcome{Kind: Failed, Step: e.exitedIn, Err: fmt.Errorf("job %s panicked: runtime.Goexit: %s ended its goroutine without returning\n%s",
				e.cfg.Def.Name(), what, debug.Stack())})
			return
		}
		e.finish(Outcome{Kind: Failed, Err: fmt.Errorf("job %s panicked: %v\n%s", e.cfg.Def.Name(), r, debug.Stack())})
	}()
	result, err := e.cfg.Def.Execute(e.ctx, e.cs.input)
	returned = true
	// Parallel steps still in flight record before the claim's last word.
	e.inflight.Wait()
	switch {
	case err != nil:
		e.finish(Outcome{Kind: Failed, Err: err, Step: e.failedStep})
	case e.pos < len(e.cs.list):
		next := e.cs.list[e.pos]
		e.finish(Outcome{Kind: Blocked, Err: jobs.Errorf(jobs.CodeReplayDiverged,
			"run %s: the code returned after %d durable calls, but the history records %d; the next recorded call is %s (seq %d)",
			e.cfg.Info.RunID, e.pos, len(e.cs.list), next, next.seq)})
	case e.unclaimedFuture() != "":
		e.finish(Outcome{Kind: Blocked, Err: jobs.Errorf(jobs.CodeReplayDiverged,
			"run %s: the history records the parallel step %q, which the code no longer starts",
			e.cfg.Info.RunID, e.unclaimedFuture())})
	default:
		if err := e.flushHandled(); err != nil {
			e.finish(Outcome{Kind: Failed, Err: err})
			return
		}
		e.finish(Outcome{Kind: Completed, Result: result})
	}
}

// finish reports this claim's outcome. The channel has room for exactly one.
func (e *Execution) finish(o Outcome) {
	select {
	case e.out <- o:
	default:
	}
}

// exit unwinds the body's goroutine. runtime.Goexit runs the body's deferred calls and cannot be
// swallowed by a recover() in job code, which a panic could.
func (e *Execution) exit() {
	e.exiting = true
	runtime.Goexit()
}

// verdict ends the claim with o and unwinds the body: a broken rule must not let the body carry
// on past it, even if the body ignores the error.
func (e *Execution) verdict(o Outcome) {
	e.finish(o)
	e.exit()
}

// Abort cancels the body's context with cause and refuses every later write with X_ABORTED.
// The worker calls it on cancel, on an attempt timeout and on a lost lease.
func (e *Execution) Abort(cause *jobs.Error) {
	e.aborted.CompareAndSwap(nil, cause)
	e.cancel(cause)
}

// Aborted returns the abort's cause, or nil.
func (e *Execution) Aborted() *jobs.Error { return e.aborted.Load() }

// LastSeq is the seq of the newest event the execution has folded.
func (e *Execution) LastSeq() int64 { return e.lastSeq.Load() }

// Exited is closed when the body's goroutine has ended.
func (e *Execution) Exited() <-chan struct{} { return e.exited }

// Resume continues a parked body on a new claim. events are the run's events after LastSeq; they
// must be exactly the wake-up of the call it is parked on (else ok is false and the caller evicts
// it and replays from scratch). span is the new claim's span (nil: not traced).
func (e *Execution) Resume(events []history.Event, rec Recorder, info jobs.RunInfo, span trace.Span) (out <-chan Outcome, ok bool) {
	e.mu.Lock()
	parked := e.parked
	e.mu.Unlock()
	if parked < 0 || !wakeOnly(events) || e.Aborted() != nil {
		return nil, false
	}
	ch := make(chan Outcome, 1)
	select {
	case e.resume <- resumeMsg{events: events, rec: rec, out: ch, info: info, span: span}:
		return ch, true
	case <-e.exited:
		return nil, false
	}
}

// wakeOnly reports whether events only settle a suspension (anything else, such as an operator's
// retry, invalidates the parked state).
func wakeOnly(events []history.Event) bool {
	if len(events) == 0 {
		return false
	}
	for _, ev := range events {
		switch ev.Kind {
		case history.KindTimerFired, history.KindEventReceived, history.KindEventWaitTimedOut:
		default:
			return false
		}
	}
	return true
}

// Evict unwinds a parked body and waits for its goroutine to end.
func (e *Execution) Evict() {
	e.cancel(jobs.Errorf(jobs.CodeAborted, "evicted"))
	select {
	case e.resume <- resumeMsg{evict: true}:
	case <-e.exited:
	}
	<-e.exited
}

// useName adds a durable call's name to the run's set, made on the first: a body without
// durable calls (a no-op job) never needs one.
func (e *Execution) useName(name string) {
	if e.names == nil {
		e.names = make(map[string]bool, 8)
	}
	e.names[name] = true
}

// begin matches a durable call against the history. It returns the index of the recorded call,
// or -1 for a live one.
func (e *Execution) begin(k callKind, name, event string) int {
	if e.names[name] {
		e.verdict(Outcome{Kind: Failed, Err: jobs.Errorf(jobs.CodeStepDuplicate,
			"run %s: the name %q is used by two durable calls; names are the replay key and must be unique in a run",
			e.cfg.Info.RunID, name)})
	}
	e.useName(name)
	if e.recordedFuture(name) && !e.failedAt(e.pos, name) {
		e.verdict(Outcome{Kind: Blocked, Err: jobs.Errorf(jobs.CodeReplayDiverged,
			"run %s: the history records %q as a parallel step (jobs.Go), the code now calls it as a %s",
			e.cfg.Info.RunID, name, k)})
	}
	if k == kindSleep || k == kindWait {
		// A suspension ends the claim: the parallel steps in flight record first.
		e.inflight.Wait()
	}
	if e.pos < len(e.cs.list) {
		rec := e.cs.list[e.pos]
		if rec.kind != k || rec.name != name || (k == kindWait && rec.event != event) {
			got := call{kind: k, name: name, event: event}
			e.verdict(Outcome{Kind: Blocked, Err: jobs.Errorf(jobs.CodeReplayDiverged,
				"run %s: durable call #%d: the history records %s (seq %d), the code now calls %s",
				e.cfg.Info.RunID, e.pos+1, rec, rec.seq, got)})
		}
		e.pos++
		return e.pos - 1
	}
	if e.rec == nil {
		e.endOfHistory(call{kind: k, name: name, event: event})
	}
	e.pos++
	return -1
}

// failedAt reports whether the call recorded at i is a failure of the step name: a step that
// failed and was tried again under its name with jobs.Go (or the reverse) has both a sequential
// record and a parallel one.
func (e *Execution) failedAt(i int, name string) bool {
	e.csMu.Lock()
	defer e.csMu.Unlock()
	return i < len(e.cs.list) && e.cs.list[i].fail != nil && e.cs.list[i].name == name
}

// undo takes back a live call that did not get recorded (its step failed), so the body may try
// the same name again.
func (e *Execution) undo(name string) {
	e.pos--
	delete(e.names, name)
}

// recordOne records a single command from the execution's own one-command slice instead of a
// slice made per call: a live step records once, and its command is the largest allocation of
// the step on the body's side. A recorder does not keep the slice past its answer.
func (e *Execution) recordOne(cmd frontend.Command) (frontend.RecordResponse, error) {
	e.recMu.Lock()
	defer e.recMu.Unlock()
	e.one[0] = cmd
	defer func() { e.one[0] = frontend.Command{} }() // nothing of this record stays reachable
	return e.recordLocked(e.one[:], true)
}

func (e *Execution) record(cmds []frontend.Command) (frontend.RecordResponse, error) {
	e.recMu.Lock()
	defer e.recMu.Unlock()
	return e.recordLocked(cmds, true)
}

// recordLocked is record with recMu held. body says the record is the body's own (not its
// parallel steps'): only those carry the failures it went on past (failed.go).
func (e *Execution) recordLocked(cmds []frontend.Command, body bool) (frontend.RecordResponse, error) {
	flush := body && len(e.handled) > 0
	if flush {
		var err error
		if cmds, err = e.withHandled(cmds); err != nil {
			return frontend.RecordResponse{}, err
		}
	}
	resp, err := e.send(cmds)
	if err != nil {
		return resp, err
	}
	if flush {
		e.handled = nil // they went out ahead of cmds
		e.queued.Store(0)
	}
	if len(cmds) == 1 && len(resp.Appended) == 1 {
		if c, ev := &cmds[0], &resp.Appended[0]; c.Kind == frontend.CmdStep && !c.Parallel &&
			ev.Kind == history.KindStepCompleted && ev.Name == c.Name {
			// A live step's answer is the event the engine built from this very command: fold
			// it from the command instead of decoding the output just encoded (a decode and
			// two copies per live step).
			e.csMu.Lock()
			defer e.csMu.Unlock()
			if ev.Seq > e.cs.lastSeq {
				e.cs.lastSeq = ev.Seq
				e.cs.step(ev.Seq, history.StepCompleted{StepName: c.Name, Output: c.Output})
				e.lastSeq.Store(ev.Seq)
			}
			return resp, nil
		}
	}
	return resp, e.fold(resp.Appended)
}

// send sends one record, refused at once when the attempt was aborted; an answer that says the
// attempt is over aborts it. recMu held.
func (e *Execution) send(cmds []frontend.Command) (frontend.RecordResponse, error) {
	if cause := e.aborted.Load(); cause != nil {
		return frontend.RecordResponse{}, jobs.Errorf(jobs.CodeAborted, "run %s: the attempt was aborted (%s); the write is refused", e.cfg.Info.RunID, cause.Message)
	}
	resp, err := e.rec.Record(e.recCtx, cmds)
	if err != nil {
		if c := jobs.CodeOf(err); c == jobs.CodeAborted || c == jobs.CodeJobLeaseLost {
			var je *jobs.Error
			errors.As(err, &je)
			e.Abort(je)
		}
	}
	return resp, err
}

// fold applies events to cs under csMu.
func (e *Execution) fold(events []history.Event) error {
	e.csMu.Lock()
	defer e.csMu.Unlock()
	if err := e.cs.apply(events); err != nil {
		return err
	}
	e.lastSeq.Store(e.cs.lastSeq)
	return nil
}

// suspend reports the suspension and parks (or unwinds) the body until its call at idx settles.
func (e *Execution) suspend(idx int) call {
	e.inflight.Wait()
	park := e.cfg.Park
	e.mu.Lock()
	if park {
		e.parked = idx
	}
	e.mu.Unlock()
	e.spanEvent("jobs.suspended", AttrCall.String(e.cs.list[idx].name))
	e.finish(Outcome{Kind: Suspended, Parked: park, Waiting: e.cs.list[idx].kind == kindWait})
	if !park {
		e.exit()
	}
	msg := <-e.resume
	e.mu.Lock()
	e.parked = -1
	e.mu.Unlock()
	if msg.evict {
		e.exit()
	}
	e.out, e.rec = msg.out, msg.rec
	e.cfg.Info = msg.info
	e.span = nil
	if msg.span != nil && msg.span.IsRecording() {
		e.span = msg.span
		e.span.AddEvent("jobs.resumed", trace.WithAttributes(AttrCall.String(e.cs.list[idx].name)))
	}
	if msg.span != nil {
		if sc := msg.span.SpanContext(); sc.IsValid() && !sc.Equal(trace.SpanContextFromContext(e.recCtx)) {
			// The records go under the current claim's span too (over HTTP they carry it as
			// their trace header), not under the first claim's, which the body's context keeps.
			// Made from the body's context again, not from the last recCtx, so a run resumed a
			// thousand times does not stack a thousand spans in its record context. Nothing
			// records meanwhile: the body is parked and its parallel steps ended before it
			// suspended. Span contexts are compared, not spans: a non-recording span (an
			// untraced worker's, carrying the run's stored context) is a struct == cannot
			// compare, and its context is the one the records already carry.
			e.recCtx = trace.ContextWithSpan(context.WithoutCancel(e.ctx), msg.span)
		}
	}
	if err := e.fold(msg.events); err != nil {
		e.verdict(Outcome{Kind: Failed, Err: err})
	}
	c := e.cs.list[idx]
	if c.state == pending {
		e.verdict(Outcome{Kind: Failed, Err: jobs.Errorf(jobs.CodeInvariant, "run %s: resumed, but %s is still pending", e.cfg.Info.RunID, c)})
	}
	return c
}

// runtimeImpl is the jobs.Runtime the body's Ctx calls.
type runtimeImpl Execution

func (r *runtimeImpl) Step(c *jobs.Ctx, name string, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	e := (*Execution)(r)
	if err := e.nested(kindStep, name); err != nil {
		return nil, err
	}
	idx := e.begin(kindStep, name, "")
	if idx >= 0 {
		if f := e.cs.list[idx].fail; f != nil {
			// A recorded failure the body went on past: the same failure, and the name free
			// for the try after it, as live.
			delete(e.names, name)
			e.failedStep = name
			return nil, replayedFailure(f)
		}
		return e.cs.list[idx].output, nil
	}
	if cause := e.aborted.Load(); cause != nil {
		e.undo(name)
		return nil, jobs.Errorf(jobs.CodeAborted, "step %q: the attempt was aborted (%s)", name, cause.Message)
	}
	ctx, span := e.startStep(c, name)
	e.steppingName = name
	e.stepping.Store(true)
	returned := false
	defer func() {
		if returned {
			return
		}
		// fn panicked, and the panic goes on to the body. A body that recovers it carries on
		// as after a failed step: no longer inside a step (its next durable call is not
		// refused as nested), the step's name free for a try again, and the panic a failure
		// that is history once the body makes another durable call (failed.go).
		e.stepping.Store(false)
		v := recover()
		if v == nil {
			// runtime.Goexit (a verdict, or fn's own), which goes on by itself.
			e.undo(name)
			e.failedStep = name
			if !e.exiting {
				e.exitedIn = name
			}
			return
		}
		e.stepFailed(name, recovered(name, v))
		panic(v)
	}()
	var out []byte
	var err error
	if span == nil {
		out, err = e.runStep(ctx, name, fn)
	} else {
		out, err = e.runStepTraced(ctx, span, name, fn)
	}
	returned = true
	e.stepping.Store(false)
	if err != nil {
		endStep(span, err)
		e.stepFailed(name, err)
		return nil, err
	}
	if _, err := e.recordOne(frontend.Command{Kind: frontend.CmdStep, Name: name, Output: out}); err != nil {
		endStep(span, err)
		e.undo(name)
		e.failedStep = name
		return nil, err
	}
	endStep(span, nil)
	return out, nil
}

// runStepTraced is runStep for a step with a span: a panic from fn (in line, or carried from the
// StepTimeout's goroutine) ends the span with the panic as its error, or the trace would lack
// the very step that failed, and then goes on as it would untraced. Apart from runStep so that
// an untraced step has no deferred call.
func (e *Execution) runStepTraced(ctx context.Context, span trace.Span, name string, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		v := recover()
		endStepPanicked(span, recovered(name, v))
		if v != nil {
			panic(v)
		}
		// nil: fn called runtime.Goexit, which goes on by itself.
	}()
	out, err := e.runStep(ctx, name, fn)
	returned = true
	return out, err
}

// runStep runs fn under the job's step timeout: at the deadline fn's context is cancelled and
// the step fails at once, whether or not fn has returned.
func (e *Execution) runStep(c context.Context, name string, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	d := e.cfg.Def.Config().StepTimeout
	if d <= 0 {
		return fn(c)
	}
	ctx, cancel := context.WithCancelCause(c)
	defer cancel(nil)
	type result struct {
		out      []byte
		err      error
		panicked *stepPanic
	}
	// The ceiling runs from before fn starts, never from whenever this goroutine is scheduled
	// after it.
	timer := e.cfg.Clock.NewTimer(d)
	defer timer.Stop()
	done := make(chan result, 1)
	go func() {
		var r result
		returned := false
		defer func() {
			if !returned {
				// fn panicked (or called runtime.Goexit) on this goroutine, where nothing would
				// recover it and the whole process would die: carry it to the goroutine that
				// waits for the step, which panics with it there, as a step run in line does.
				// Past the deadline nobody waits, and the buffered send drops it.
				r.panicked = recovered(name, recover())
			}
			done <- r
		}()
		r.out, r.err = fn(ctx)
		returned = true
	}()
	select {
	case r := <-done:
		if r.panicked != nil {
			panic(r.panicked)
		}
		return r.out, r.err
	case <-timer.C():
		err := jobs.Errorf(jobs.CodeStepTimeout, "step %q passed its stepTimeout of %s", name, d)
		cancel(err)
		return nil, err
	}
}

func (r *runtimeImpl) Sleep(c *jobs.Ctx, name string, d time.Duration) error {
	e := (*Execution)(r)
	if err := e.nested(kindSleep, name); err != nil {
		return err
	}
	idx := e.begin(kindSleep, name, "")
	if idx < 0 {
		// A sleep of d <= 0 is already due: it wakes now, not at now + d. Below -24h, now + d
		// lies before the earliest wake time the engine accepts (it allows that much for a
		// worker's clock lagging its own), and the refusal, X_BAD_REQUEST, would fail the run
		// terminally where a sleep of -1s wakes at once.
		wake := e.cfg.Clock.Now().Add(max(d, 0))
		e.spanEvent("jobs.sleep", AttrCall.String(name), attribute.String("jobs.wake_at", wake.UTC().Format(time.RFC3339Nano)))
		resp, err := e.record([]frontend.Command{{Kind: frontend.CmdSleep, Name: name,
			WakeAt: wake, Sticky: e.cfg.Park}})
		if err != nil {
			e.undo(name)
			return err
		}
		idx = len(e.cs.list) - 1
		_ = resp
	}
	if e.cs.list[idx].state == pending {
		e.suspend(idx)
	}
	return nil
}

func (r *runtimeImpl) WaitForEvent(c *jobs.Ctx, name, event string, match map[string]any, timeout time.Duration, opts jobs.WaitOptions) ([]byte, bool, error) {
	e := (*Execution)(r)
	if err := e.nested(kindWait, name); err != nil {
		return nil, false, err
	}
	keys, err := history.MatchKeys(match)
	if err != nil {
		return nil, false, jobs.Wrap(jobs.CodeEncoding, err, "wait %q", name)
	}
	idx := e.begin(kindWait, name, event)
	if idx < 0 {
		e.spanEvent("jobs.wait", AttrCall.String(name), AttrEvent.String(event))
		if _, err := e.record([]frontend.Command{{Kind: frontend.CmdWait, Name: name, Event: event, Match: keys,
			TimeoutAt: e.cfg.Clock.Now().Add(timeout), Sticky: e.cfg.Park, Lookback: string(opts.Lookback)}}); err != nil {
			e.undo(name)
			return nil, false, err
		}
		idx = e.indexOf(kindWait, name)
	}
	c2 := e.cs.list[idx]
	if c2.state == pending {
		c2 = e.suspend(idx)
	}
	if c2.state == timedOut {
		return nil, false, nil
	}
	return c2.output, true, nil
}

// indexOf finds the newest recorded call of that kind and name (a live wait may have been
// answered at once from the lookback window, so the EventReceived already follows it).
func (e *Execution) indexOf(k callKind, name string) int {
	for i := len(e.cs.list) - 1; i >= 0; i-- {
		if e.cs.list[i].kind == k && e.cs.list[i].name == name {
			return i
		}
	}
	return len(e.cs.list) - 1
}

// endOfHistory ends a check-mode execution at its first live call. A history that records the
// run's completion has no live call left: the old code completed without this one, so the code
// changed under it (X_REPLAY_DIVERGED), however the call was added (at the end, or as a
// parallel step).
func (e *Execution) endOfHistory(c call) {
	if e.cs.completed {
		e.verdict(Outcome{Kind: Blocked, Err: jobs.Errorf(jobs.CodeReplayDiverged,
			"run %s: the history records the run's completion, the code now also calls %s",
			e.cfg.Info.RunID, c)})
	}
	e.verdict(Outcome{Kind: EndOfHistory})
}
