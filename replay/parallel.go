package replay

import (
	"context"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
)

// Parallel steps (jobs.Go). A recorded one is served from the history by name, so the order the
// steps finished in (the order of their StepCompleted events) does not matter on replay. A live
// one runs on its own goroutine and records as it finishes; records are serialised per execution
// (recMu), each built on the seq the previous one left, so the engine's after_seq check holds,
// steps that finish while a record is in flight share the next record (pendingStep), and a
// record's steps are settled before the next record begins.
//
// recMu orders records and nothing else: the call state (cs) has its own lock, csMu, taken only
// to look a name up or to fold a record's answer in. So Go starts (or serves from the history)
// a step while another's record is on the wire, a step that finishes meanwhile queues its result
// for the next record, and the body's own calls run up to their record.

var _ jobs.Parallel = (*runtimeImpl)(nil)

type pendingStep struct {
	cmd frontend.Command
	p   *jobs.Promise
}

// Go implements jobs.Parallel.
func (r *runtimeImpl) Go(c *jobs.Ctx, name string, fn func(context.Context) ([]byte, error)) *jobs.Promise {
	e := (*Execution)(r)
	p := jobs.NewPromise()
	if err := e.nested(kindStep, name); err != nil {
		p.Settle(nil, 0, err)
		return p
	}
	if e.bodyG.Load() == 0 {
		e.bodyG.Store(goid())
	}
	// The failures the body went on past go out before a step it starts after them: the step's
	// own record is not the body's, and does not carry them (failed.go), yet the body may have
	// started it because of them.
	if err := e.flushHandled(); err != nil {
		p.Settle(nil, 0, err)
		return p
	}
	if e.names[name] {
		e.verdict(Outcome{Kind: Failed, Err: jobs.Errorf(jobs.CodeStepDuplicate,
			"run %s: the name %q is used by two durable calls; names are the replay key and must be unique in a run",
			e.cfg.Info.RunID, name)})
	}
	e.useName(name)
	if e.claimed == nil {
		e.claimed = map[string]bool{}
	}
	e.claimed[name] = true
	e.csMu.Lock()
	rec, ok := e.cs.futures[name]
	e.csMu.Unlock()
	if ok {
		if rec.fail != nil {
			p.Settle(nil, rec.seq, replayedFailure(rec.fail))
			return p
		}
		p.Settle(rec.output, rec.seq, nil)
		return p
	}
	if i := e.recordedAhead(name); i >= 0 {
		// The history records the name as a sequential call the body has not reached: the code
		// now starts it with jobs.Go. Run live, its function ran again (a charge twice) and its
		// record was then refused as a duplicate, failing the run for good; and a check replay
		// passed the change. It is the mirror of begin's check of a parallel step now called
		// as a step.
		got := e.cs.list[i]
		e.verdict(Outcome{Kind: Blocked, Err: jobs.Errorf(jobs.CodeReplayDiverged,
			"run %s: the history records %s (seq %d), the code now starts it with jobs.Go",
			e.cfg.Info.RunID, got, got.seq)})
	}
	if e.rec == nil {
		e.endOfHistory(call{kind: kindStep, name: name})
	}
	if cause := e.aborted.Load(); cause != nil {
		p.Settle(nil, 0, jobs.Errorf(jobs.CodeAborted, "step %q: the attempt was aborted (%s)", name, cause.Message))
		return p
	}
	// A parallel step run live is a step run live: it gets its span, as a Step does, and its
	// function the span's context. Opened here, on the body's goroutine, where the current
	// claim's span (e.span, which a resume replaces) is read; the goroutine ends it, after the
	// step's record as a Step's, or with the failure or the panic. A replayed one above gets
	// none, as a replayed Step.
	ctx, span := e.startStep(c, name)
	e.inflight.Add(1)
	e.running.Add(1) // before the function can make a call
	go func() {
		defer e.inflight.Done()
		defer e.running.Add(-1)
		returned := false
		defer func() {
			if !returned {
				// fn panicked (here, or on its own goroutine under a StepTimeout: runStep panics
				// again with it here). Nothing above this goroutine would recover it, and the
				// process would die: the step fails with the panic instead, Await returns it
				// (panic.go), and it is queued as any failure is (failed.go). Settled before inflight.Done, so a body that
				// waits for the steps in flight sees it settled. Its span ends first, failed
				// with the panic (an unended span is never exported).
				sp := recovered(name, recover())
				if span != nil {
					endStepPanicked(span, sp)
				}
				e.settleFailed(p, name, sp)
			}
		}()
		out, err := e.runStep(ctx, name, fn)
		returned = true
		if err != nil {
			endStep(span, err)
			e.settleFailed(p, name, err)
			return
		}
		e.recordParallel(frontend.Command{Kind: frontend.CmdStep, Name: name, Output: out, Parallel: true}, p)
		if span != nil {
			// Settled by now: by this record, or by an earlier holder of recMu that took it.
			<-p.Done()
			_, _, err := p.Outcome()
			endStep(span, err)
		}
	}()
	return p
}

// settleFailed settles p with a parallel step's failure, queued first for the body's next
// record: a body that reads it and goes on finds it recorded by then.
func (e *Execution) settleFailed(p *jobs.Promise, name string, err error) {
	e.futureFailed(name, err)
	p.Settle(nil, 0, err)
}

// recordParallel records one finished parallel step, together with any others that finished
// meanwhile, and settles p with the seq that recorded it. Every promise of a record is settled
// before the next record may begin, in the order the record appended them: a step recorded
// later is never seen settled while one recorded earlier is not, so a live AwaitFirst names the
// step the history records first, as its replay will.
func (e *Execution) recordParallel(cmd frontend.Command, p *jobs.Promise) {
	e.pmu.Lock()
	e.pend = append(e.pend, &pendingStep{cmd: cmd, p: p})
	e.pmu.Unlock()
	// Whoever holds recMu next sends everything pending, this step included unless an earlier
	// holder already took it (and settled it).
	e.recMu.Lock()
	defer e.recMu.Unlock()
	for e.recordPending() {
	}
}

// recordPending sends, with recMu held, up to frontend.MaxRecordCommands of the pending steps in
// one record and settles them; it reports whether more are pending (thousands of parallel steps
// that finished while one record was in flight go in several records, one after another, each a
// record the engine accepts).
func (e *Execution) recordPending() (more bool) {
	e.pmu.Lock()
	batch := e.pend
	if len(batch) > frontend.MaxRecordCommands {
		batch, e.pend = batch[:frontend.MaxRecordCommands:frontend.MaxRecordCommands], batch[frontend.MaxRecordCommands:]
	} else {
		e.pend = nil
	}
	more = len(e.pend) > 0
	e.pmu.Unlock()
	if len(batch) == 0 {
		return false
	}
	cmds := make([]frontend.Command, len(batch))
	for i, b := range batch {
		cmds[i] = b.cmd
	}
	resp, err := e.recordLocked(cmds, false)
	seqs := map[string]int64{}
	for _, ev := range resp.Appended {
		if ev.Kind == history.KindStepCompleted {
			seqs[ev.Name] = ev.Seq
		}
	}
	for _, b := range batch {
		if err != nil {
			b.p.Settle(nil, 0, err)
		} else {
			b.p.Settle(b.cmd.Output, seqs[b.cmd.Name], nil)
		}
	}
	return more
}

// recordedFuture reports whether the history records name as a parallel step.
func (e *Execution) recordedFuture(name string) bool {
	e.csMu.Lock()
	defer e.csMu.Unlock()
	_, ok := e.cs.futures[name]
	return ok
}

// unclaimedFuture returns a recorded parallel step the body never started, or "".
func (e *Execution) unclaimedFuture() string {
	e.csMu.Lock()
	defer e.csMu.Unlock()
	for name := range e.cs.futures {
		if !e.claimed[name] {
			return name
		}
	}
	return ""
}

// recordedAhead returns the index of a sequential call named name that the history records and
// the body has not reached yet, or -1.
func (e *Execution) recordedAhead(name string) int {
	e.csMu.Lock()
	defer e.csMu.Unlock()
	for i := e.pos; i < len(e.cs.list); i++ {
		if e.cs.list[i].name == name {
			return i
		}
	}
	return -1
}
