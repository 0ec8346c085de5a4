package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// ledger is what the engine must know of a run's history to check a worker's record against it:
// the durable-call names in effect and the attempt the run is on, as of seq.
//
// Ledgers are kept in an LRU (Config.Ledgers) so that a run's records, one per step, cost no
// history read: a ledger only ever grows by the events its own run's commits appended, and it is
// read from the store (from its seq on) only when another process or a timer appended since. The
// cache is an optimisation, never the authority: Mutation.AfterSeq makes the store refuse a write
// whose seq is not the run's last, so a check made against a ledger at that seq holds at commit,
// whichever engine process made it.
type ledger struct {
	mu      sync.Mutex
	seq     int64
	names   map[string]int64 // durable-call name → the seq that recorded it
	attempt int
	// failed is the attempt the run failed on, until a retry reopens it; 0 when it is not failed.
	failed  int
	job     string // from RunStarted
	started time.Time
	// woke is what the run's last wake-up appended (a fired timer's event, a delivered event),
	// kept until anything else is folded: the claim that follows hands it to the worker
	// (Task.Tail), which resumes its parked body from it instead of reading the history
	// (wokeTail).
	woke []history.Event
	// retried is the seq of the newest RunRetried from a step (FromSeq > 0), 0 when there is
	// none: the generation a publish or enqueue made since then names (callIDIn).
	retried int64
}

// versionKey is a change point's key among a ledger's names. Change ids are their own namespace
// (a step and a change point may share a name); the NUL byte, refused in every name, keeps the
// two apart.
func versionKey(id string) string { return "\x00version:" + id }

// names is made on the first name recorded: a no-op job's ledger never records one, and a map
// per claimed run was an allocation of every job's claim.
func newLedger() *ledger { return &ledger{attempt: 1} }

func (l *ledger) setName(name string, seq int64) {
	if l.names == nil {
		l.names = make(map[string]int64, 8)
	}
	l.names[name] = seq
}

// fold applies events in seq order; events at or before l.seq are skipped (a re-read and a
// commit's answer can overlap). Called with l.mu held.
func (l *ledger) fold(events []history.Event) error {
	for _, ev := range events {
		if ev.Seq <= l.seq {
			continue
		}
		l.seq, l.woke = ev.Seq, nil // a wake-up's events are the tail only until anything follows
		switch ev.Kind {
		case history.KindRunStarted:
			p, err := ev.Decode()
			if err != nil {
				return err
			}
			l.job, l.started = p.(history.RunStarted).Job, ev.At
		case history.KindStepCompleted, history.KindTimerStarted, history.KindEventWaitStarted:
			l.setName(ev.Name, ev.Seq)
		case history.KindVersionMarked:
			l.setName(versionKey(ev.Name), ev.Seq)
		case history.KindAttemptFailed:
			p, err := ev.Decode()
			if err != nil {
				return err
			}
			if a := p.(history.AttemptFailed); a.Stop == "" {
				l.attempt = a.Attempt + 1
			}
		case history.KindRunFailed:
			p, err := ev.Decode()
			if err != nil {
				return err
			}
			l.failed = max(p.(history.RunFailed).Attempt, 1)
		case history.KindRunRetried:
			p, err := ev.Decode()
			if err != nil {
				return err
			}
			// The count goes on past an operator's retry (store.RetriedAttempt): a failed run
			// is on its next attempt, a blocked one on the attempt it was on.
			if l.failed > 0 {
				l.attempt, l.failed = l.failed+1, 0
			}
			// Retrying from a step discards the calls recorded from it on: their names may be
			// recorded again.
			if from := p.(history.RunRetried).FromSeq; from > 0 {
				l.retried = ev.Seq
				for name, seq := range l.names {
					if seq >= from {
						delete(l.names, name)
					}
				}
			}
		}
	}
	return nil
}

// ledgerAt returns the run's ledger at exactly seq, locked; the caller unlocks it. A run whose
// history is past seq, or short of it, is X_HISTORY_STALE: the record was built on a history
// the run does not have.
func (e *Engine) ledgerAt(ctx context.Context, runID string, seq int64) (*ledger, error) {
	l, err := e.ledgerFrom(ctx, runID, seq)
	if err != nil {
		return nil, err
	}
	if l.seq != seq {
		have := l.seq
		l.mu.Unlock()
		return nil, jobs.Errorf(jobs.CodeHistoryStale, "run %s: the record was built on seq %d, the run's history is at seq %d", runID, seq, have)
	}
	return l, nil
}

// ledgerFrom returns the run's ledger folded to seq at least, locked; the caller unlocks it. A
// ledger short of seq reads the history after its own seq; one that fails to is dropped (it may
// be half-folded), to start afresh next time.
func (e *Engine) ledgerFrom(ctx context.Context, runID string, seq int64) (*ledger, error) {
	l, ok := e.ledgers.Get(runID)
	if !ok {
		l = newLedger()
		if prev, found, _ := e.ledgers.PeekOrAdd(runID, l); found {
			l = prev
		}
	}
	l.mu.Lock()
	if l.seq < seq {
		events, err := e.store.HistoryRead(ctx, runID, l.seq, 0)
		if err == nil {
			err = l.fold(events)
		}
		if err != nil {
			l.mu.Unlock()
			e.ledgers.Remove(runID)
			return nil, err
		}
	}
	return l, nil
}

// settle folds what a commit appended, or what a worker's history read found after the ledger's
// seq, into the run's ledger, so the run's next record needs no read. A ledger that moved on
// meanwhile is left alone: it is re-read when next needed.
func (e *Engine) settle(runID string, appended []history.Event) {
	e.continueLedger(runID, appended, false)
}

// settleWake is settle for what a wake-up appended, which the ledger also keeps for the run's
// next claim (wokeTail).
func (e *Engine) settleWake(runID string, appended []history.Event) {
	e.continueLedger(runID, appended, true)
}

func (e *Engine) continueLedger(runID string, appended []history.Event, wake bool) {
	l, ok := e.ledgers.Peek(runID)
	if !ok || len(appended) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// Events at or before l.seq are skipped by fold: a worker's read from the start of the
	// history (a replay) continues a ledger as well as a read from its seq does. One that starts
	// past l.seq+1 leaves a gap: something else was appended, and is read when next needed.
	if appended[0].Seq > l.seq+1 {
		return
	}
	if err := l.fold(appended); err != nil {
		e.ledgers.Remove(runID)
		return
	}
	if wake && l.seq == appended[len(appended)-1].Seq && eventBytes(appended) <= maxWokeBytes {
		l.woke = appended
	}
}

// maxWokeBytes bounds the events a ledger keeps for its run's next claim: a delivered event's
// payload may be a mebibyte, and the ledgers are many (Config.Ledgers). A larger one is read by
// the worker, as before.
const maxWokeBytes = 4 << 10

func eventBytes(evs []history.Event) int {
	n := 0
	for _, ev := range evs {
		n += len(ev.Name) + len(ev.Data)
	}
	return n
}

// wokeTail is what the claimed run's last wake-up appended, when that is the end of its history
// (lastSeq) and the engine knows it: the worker that parked the run needs nothing else to resume
// it. Nil otherwise; the worker then reads the history.
func (e *Engine) wokeTail(runID string, lastSeq int64) []history.Event {
	l, ok := e.ledgers.Peek(runID)
	if !ok {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// fold empties woke whenever the ledger moves on, so a woke there ends at l.seq.
	if len(l.woke) == 0 || l.seq != lastSeq {
		return nil
	}
	return slices.Clone(l.woke) // the worker's side may rewrite its events (codec/wrap opens them)
}

// claimVerdict explains a record the ledger refused. A writer that no longer holds the claim
// (its lease lapsed and the run was claimed again, or it was cancelled) is told that, as the
// store's fence check would: a zombie's stale history is the symptom, its lost claim the cause,
// and the worker acts on the cause (it stops writing).
func (e *Engine) claimVerdict(ctx context.Context, req frontend.RecordRequest, refusal error) error {
	if !jobs.HasCode(refusal, jobs.CodeHistoryStale) && !jobs.HasCode(refusal, jobs.CodeStepDuplicate) {
		return refusal
	}
	run, err := e.store.RunGet(ctx, req.RunID)
	switch {
	case err != nil:
		return err
	}
	if lost := store.FenceRefusal(req.RunID, run.State, run.Fence, req.Fence); lost != nil {
		return lost
	}
	return refusal
}

// seedLedger gives a fresh run (its history is RunStarted alone) its ledger at claim time, from
// the row: its first record then reads no history, as the worker reads none either.
func (e *Engine) seedLedger(r store.Run) {
	if r.LastSeq != 1 {
		return
	}
	l := newLedger()
	l.seq, l.job, l.started = 1, r.Job, r.CreatedAt
	e.ledgers.PeekOrAdd(r.ID, l)
}
