package engine

import (
	"context"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/store"
)

// SlotRetry is how long a claim handed back over a fleet concurrency cap waits before it is
// claimable again: long enough not to spin on a full cap, short against a job's own runtime.
const SlotRetry = 500 * time.Millisecond

// takeSlots takes a fleet concurrency slot for every claimed run of a capped job. A slot is a row
// every process sees, expiring with the lease, so a SIGKILLed worker's slot comes back by itself.
// A run whose cap is full is handed straight back, delayed by SlotRetry, without spending an
// attempt.
func (e *Engine) takeSlots(ctx context.Context, runs []store.Run, limits map[string]int) []store.Run {
	kept := runs[:0]
	var handBack []store.Mutation
	for _, r := range runs {
		limit := limits[r.Job]
		if limit <= 0 {
			kept = append(kept, r)
			continue
		}
		ok, err := e.store.SlotAcquire(ctx, store.SlotParams{Key: frontend.SlotKey(r.Job), Limit: limit,
			Holder: r.ID, Now: e.clock.Now(), Until: r.LeaseUntil})
		if err == nil && ok {
			kept = append(kept, r)
			continue
		}
		now := e.clock.Now()
		e.handedBack(r, handBackJobCap, jobCapNote(r.Job, limit))
		handBack = append(handBack, store.Mutation{RunID: r.ID, Fence: r.Fence, Now: now,
			Transition: store.Transition{State: store.StateDelayed,
				Timers: []store.Timer{{Key: timerHand, DueAt: now.Add(SlotRetry)}}}})
	}
	if len(handBack) > 0 {
		if _, err := e.store.RunApply(ctx, handBack); err != nil {
			// The claims lapse with their lease instead; nothing is lost.
			e.log.Warn("jobs.slot.hand-back-failed", "runs", len(handBack), "err", err)
		}
		e.timers.Kick()
	}
	return kept
}

// claimsStillHeld runs once a poll's claims took their slots (takeSlots, takeKeyed). A cancel
// that committed after the claim and before a slot was taken released nothing (the slot was not
// taken yet), and the slot is then held for a cancelled run for a whole lease, keeping the next
// run of a capped job out over a cap nobody uses. So look at each run that took a slot again:
// either its cancel (or any end) commits after this read, and its release follows the slots
// taken before it, or this read sees the run gone from its claim, releases its slots here and
// drops it from the poll's answer. A run still running under another claim (a later fence: this
// claim's lease lapsed and the run was claimed again) keeps its slots, which are that claim's
// now (a slot's holder is the run), and only this claim's task is dropped.
func (e *Engine) claimsStillHeld(ctx context.Context, f *fleet, runs []store.Run) []store.Run {
	kept := runs[:0]
	for _, r := range runs {
		if f.cap(r.Job) <= 0 && len(f.keyedCaps(r.Job)) == 0 {
			kept = append(kept, r)
			continue
		}
		run, err := e.store.RunGet(ctx, r.ID)
		if err != nil {
			// Unread: hand the task out. If the run did leave its claim, the worker's first
			// record or heartbeat is refused and the slot lapses with the lease, as before.
			kept = append(kept, r)
			continue
		}
		if run.State == store.StateRunning && run.Fence == r.Fence {
			kept = append(kept, r)
			continue
		}
		if run.State != store.StateRunning {
			e.releaseSlots(context.WithoutCancel(ctx), run)
		}
		e.log.Debug("jobs.slot.claim-ended", "run", r.ID, "fence", r.Fence, "state", run.State)
	}
	return kept
}

// renewSlot extends a held slot with the lease. Losing it means another worker may now run a
// run of the same job over the cap. The slot and its cap are the run's job's as declared in the
// manifest, whatever the lease names: a worker cannot take another job's slot, nor let its own
// lapse by not naming it.
func (e *Engine) renewSlot(ctx context.Context, l frontend.Lease, now time.Time) error {
	job, ok := e.claimed.Get(l.RunID)
	if !ok {
		run, err := e.store.RunGet(ctx, l.RunID)
		if err != nil {
			return err
		}
		job = run.Job
		e.claimed.Add(l.RunID, job)
	}
	f, err := e.fleetView(ctx, false)
	if err != nil {
		return err
	}
	renewed, err := e.renewKeyed(ctx, f, l.RunID, job, now)
	if err != nil {
		return err
	}
	if limit := f.cap(job); limit > 0 {
		slot := frontend.SlotKey(job)
		ok, err = e.store.SlotAcquire(ctx, store.SlotParams{Key: slot, Limit: limit, Holder: l.RunID,
			Now: now, Until: now.Add(e.matching.Lease())})
		if err != nil {
			return err
		}
		if !ok {
			return jobs.Errorf(jobs.CodeJobSlotLost, "run %s: its slot of %s lapsed and was taken", l.RunID, slot)
		}
		renewed = true
	}
	if renewed {
		// The run may have left running since its lease was renewed above (its final record, a
		// cancel), and that release may have come before this renewal, which would then take
		// the freed slot again for a whole lease, keeping the next run of the job out over a cap
		// nobody holds. So look again: either the run's end commits after this read, and its
		// release follows this renewal, or this read sees it ended and releases the slots here.
		run, err := e.store.RunGet(ctx, l.RunID)
		if err != nil {
			return err
		}
		if run.State != store.StateRunning || run.Fence != l.Fence {
			e.releaseSlots(ctx, run)
		}
	}
	return nil
}

// releaseSlots gives back a run's fleet slot and keyed slot once it has left running: the slot
// and cap of the run's own job, whatever a request named (see renewSlot).
func (e *Engine) releaseSlots(ctx context.Context, run store.Run) {
	if f, err := e.fleetView(ctx, false); err == nil && f.cap(run.Job) > 0 {
		e.releaseSlot(ctx, frontend.SlotKey(run.Job), run.ID)
	}
	e.releaseKeyed(ctx, run)
}

// releaseSlot gives a slot back once a run has left running. Best-effort: an unreleased slot
// expires with the lease it was taken for.
func (e *Engine) releaseSlot(ctx context.Context, slot, runID string) {
	if err := e.store.SlotRelease(ctx, slot, runID); err != nil {
		e.log.Warn("jobs.slot.release-failed", "slot", slot, "run", runID, "err", err)
	}
}
