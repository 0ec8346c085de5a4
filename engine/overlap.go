package engine

import (
	"context"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// overlapLoop is the committer when Config.OverlapAt is set: one group commit in flight as a
// rule, and a second one only once the next batch is full.
//
// With a single commit in flight, the records that arrive during its round trip and fsync wait
// for it to finish before theirs can start, so each commit's latency is paid twice by the runs
// that just missed it. Starting the next commit at once (several committers) halves that wait
// but shrinks every batch, which costs the database more per step. Waiting until OverlapAt
// records are queued keeps batches large and still starts a second fsync while the first is in
// flight when the load is there to fill it; at low load it behaves like the single committer.
// The store already admits two commits at once (Committers > 1 does that); two records of one
// run are never in the same pair of batches out of order, because a run's next record waits
// for its previous one's answer.
//
// The two committers are long-lived goroutines and each batch's slice comes back to be reused:
// a goroutine started per commit grew its stack through the store's driver on every batch, and
// a slice of MaxBatch made per batch was most of the engine's allocated bytes per record.
func (e *Engine) overlapLoop(ctx context.Context) {
	const maxInFlight = 2
	commitCtx := context.WithoutCancel(ctx)
	// Buffered to maxInFlight: a batch is handed over only while a committer is free, and a
	// committer hands its slice back without waiting for the loop.
	batches := make(chan []*commitReq, maxInFlight)
	finished := make(chan committed, maxInFlight)
	defer close(batches)
	for range maxInFlight {
		go func() {
			var scratch []store.Mutation
			for b := range batches {
				back := e.commit(commitCtx, b, &scratch)
				clear(b) // no answered record stays reachable from a spare slice
				finished <- committed{batch: b[:0], n: len(b), back: back}
			}
		}()
	}
	spare := make([][]*commitReq, 0, maxInFlight)
	inFlight := 0
	done := func(c committed) {
		spare = append(spare, c.batch)
		inFlight--
		e.adapt(c)
	}
	wait := func() { done(<-finished) }
	stop := func() {
		for inFlight > 0 {
			wait()
		}
		// Drain what was queued before the stop, so no caller waits forever.
		for {
			select {
			case r := <-e.commits:
				r.done <- commitRes{err: jobs.Errorf(jobs.CodeDraining, "the engine is stopping")}
			default:
				return
			}
		}
	}
	for {
		if inFlight == maxInFlight {
			wait()
		}
		if inFlight > 0 && len(e.commits) < e.overlapNow() {
			// A commit is in flight: the next batch gathers in the queue until it finishes
			// (then it goes, as with one committer) or until OverlapAt records wait, enough to
			// be worth a second fsync in parallel (Record rings full). The loop sleeps
			// meanwhile rather than waking for every record that arrives.
			select {
			case b := <-finished:
				done(b)
			case <-e.full: // may be stale: the queue's length is looked at again
			case <-ctx.Done():
				stop()
				return
			}
			continue
		}
		var first *commitReq
		select {
		case first = <-e.commits:
		case b := <-finished:
			done(b)
			continue
		case <-ctx.Done():
			stop()
			return
		}
		var batch []*commitReq
		if n := len(spare); n > 0 {
			batch, spare = spare[n-1], spare[:n-1]
		} else {
			batch = make([]*commitReq, 0, e.cfg.MaxBatch)
		}
		batch = e.fillBatch(append(batch, first))
		inFlight++
		batches <- batch
	}
}

// committed is a finished group commit: its slice, to be reused, its size, and how many of its
// records belong to runs that are still running (their bodies continue and will record again).
type committed struct {
	batch   []*commitReq
	n, back int
}

// overlapNow is how many waiting records start a second group commit in flight: OverlapAt, or
// more after a commit whose runs mostly ended their claims (adapt). 0 before the first commit.
func (e *Engine) overlapNow() int {
	if n := e.overlapAt.Load(); n > 0 {
		return int(n)
	}
	return e.cfg.OverlapAt
}

// deepOverlap is how many times OverlapAt the threshold becomes after a commit of claims' last
// records (completions, failures, releases).
const deepOverlap = 4

// adapt sets the threshold from the commit that just finished. A step's record holds its
// run's body until the answer, so its wait is the run's latency, and OverlapAt keeps it short.
// A claim's last record does not: its slot went to the next claim when it was sent (the
// worker's claim-ahead), so a longer wait costs nothing while the worker holds spare claims,
// and a deeper batch saves the database commits and the process CPU per job (the backlog
// drain). A batch in which most records ended their claims says that is the load.
func (e *Engine) adapt(c committed) {
	n := e.cfg.OverlapAt
	if c.n > 0 && 2*c.back < c.n {
		n = min(deepOverlap*n, e.cfg.MaxBatch)
	}
	e.overlapAt.Store(int32(n))
}
