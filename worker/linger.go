package worker

import (
	"time"

	"github.com/ultimat3/jobs/frontend"
)

// Lingering for a larger claim: every claim is a store transaction (on Postgres a walk of the
// ready runs, an UPDATE and a commit with its fsync), and under load a poller used to claim as
// soon as one slot was free, so it made about one claim per two runs, each beside the group
// commits that the steps need. Slots free in waves (a group commit's answer lets many runs send
// their last record at once), so a poller that has runs in flight and only a few free slots waits
// briefly for the rest of the wave before it claims.
//
// It never delays an idle poller: with no claim of its queue in flight, a single ready run is
// claimed at once. And the wait is short (ClaimLinger, a few milliseconds, under the length of
// one step): a run that is ready while every slot is busy is waiting for a slot anyway, and the
// linger only adds to that wait when the slot it would take is already free.
//
// A claim that costs no flush (frontend.CheapClaims: an in-process engine on Postgres, whose
// claims commit asynchronously) is not worth a wait: by default such a poller does not linger.
// Ten-step runs in process, alternating with and without the linger in four batches (26 runs
// each, bench/ANALYSIS.md, "Claims without waiting for their flush"): median 1,020 runs/s
// without it against 888 with it; the backlog drain at 100 workers 9,417 against 9,170, at 32
// the same. On SQLite (a claim is a commit of the one writer, and ten-step there ran about 5%
// slower without the linger) and behind the HTTP API (the client does not say) it stays.

const (
	defaultClaimLinger = 2 * time.Millisecond
	// claimBatchShare is the share of a queue's concurrency that a poller waits for while it
	// lingers: a quarter claims in batches about twice as large as without, and its linger
	// ends early whenever a wave frees that many.
	claimBatchShare = 4
	// minDefaultBatch is the smallest default batch a poller lingers for. A smaller one saves
	// only a few claims while its linger costs the same idle slot: measured with remote worker
	// processes of 16 slots (a batch of 4), ten-step claims fell by a fifth at the same rate,
	// but no-op claims rose by 5–29% and the rate fell by 2–11%. ClaimBatch set explicitly
	// lingers for any batch from 2.
	minDefaultBatch = 8
)

// lingerFor returns how long a poller of a queue of the given concurrency lingers, and for how
// many free slots; zero when it does not.
func (w *Worker) lingerFor(concurrency int) (time.Duration, int) {
	if w.cfg.ClaimLinger < 0 {
		return 0, 0
	}
	d := w.cfg.ClaimLinger
	if d == 0 {
		if c, ok := w.cfg.Frontend.(frontend.CheapClaims); ok && c.CheapClaims() {
			return 0, 0
		}
		d = defaultClaimLinger
	}
	k := w.cfg.ClaimBatch
	if k == 0 {
		if k = concurrency / claimBatchShare; k < minDefaultBatch {
			return 0, 0
		}
	}
	k = min(k, concurrency)
	if k < 2 {
		return 0, 0
	}
	return d, k
}

// linger waits up to d for free to reach k, taking each slot that frees (with its held token);
// it returns the free slots now taken. It does not wait when no other claim of the queue is in
// flight (held counts them besides the free slots just taken).
func linger(free, k int, d time.Duration, slots, held chan struct{}, done <-chan struct{}) int {
	if d <= 0 || free >= k || len(held) <= free {
		return free
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for free < k {
		select {
		case slots <- struct{}{}:
		case <-t.C:
			return free
		case <-done:
			return free
		}
		select {
		case held <- struct{}{}:
			free++
		default:
			// Every held claim is still counted (their last records commit): claim with what
			// is free now rather than wait for a commit.
			<-slots
			return free
		}
	}
	return free
}
