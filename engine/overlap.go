package engine

import (
	"context"
	"time"

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
	finished := make(chan []*commitReq, maxInFlight)
	defer close(batches)
	for range maxInFlight {
		go func() {
			var scratch []store.Mutation
			for b := range batches {
				e.commit(commitCtx, b, &scratch)
				clear(b) // no answered record stays reachable from a spare slice
				finished <- b[:0]
			}
		}()
	}
	gatherTimer := time.NewTimer(time.Hour)
	gatherTimer.Stop()
	spare := make([][]*commitReq, 0, maxInFlight)
	inFlight := 0
	done := func(b []*commitReq) { spare = append(spare, b); inFlight-- }
	wait := func() { done(<-finished) }
	stop := func() {
		for inFlight > 0 {
			wait()
		}
		// Drain what was queued before the stop, so no caller waits forever.
		for {
			select {
			case r := <-e.commits:
				e.answer(commitCtx, r, commitRes{err: jobs.Errorf(jobs.CodeDraining, "the engine is stopping")})
			default:
				return
			}
		}
	}
	for {
		if inFlight == maxInFlight {
			wait()
		}
		if inFlight > 0 && len(e.commits) < e.cfg.OverlapAt {
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
		if inFlight == 0 {
			e.gather(ctx, gatherTimer)
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

// gather holds a group commit about to start, with none in flight, until the runs the previous
// commit answered have sent their next records (Engine.owed), OverlapAt records wait, or
// GatherWait (by default half the previous commit's duration) has passed.
//
// Without it the records split into two cohorts that alternate: while one cohort's commit is in
// flight the other's records queue, and when it returns the queued cohort goes at once, alone,
// while the returning one queues behind it. Each cohort then pays two commits per step, and
// every commit carries half the records the engine serves. With one engine serving 32 runs the
// cohorts are large enough to start a second commit (OverlapAt) and the split costs little; two
// engines sharing one database serve 16 each, cohorts of 8 never reach OverlapAt, and the
// database saw twice the commits per step. The answered runs come back within a round trip of
// the worker, far shorter than a commit, so waiting for them merges the cohorts into one batch.
// At low load nothing is owed, or the one record owed is the one being committed, and nothing
// waits.
func (e *Engine) gather(ctx context.Context, t *time.Timer) {
	if e.cfg.GatherWait < 0 || e.owed.Load() <= 0 || len(e.commits)+1 >= e.cfg.OverlapAt {
		return
	}
	wait := e.cfg.GatherWait
	if wait == 0 {
		wait = time.Duration(e.lastCommit.Load()) / 2
	}
	if wait <= 0 {
		return
	}
	t.Reset(wait)
	defer t.Stop()
	for e.owed.Load() > 0 && len(e.commits)+1 < e.cfg.OverlapAt {
		select {
		case <-e.back: // may be stale: owed is looked at again
		case <-e.full:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
