package scheduler

import (
	"context"
	"time"

	"github.com/ultimat3/jobs/store"
)

// A leader renews its lease every round, to its own clock's now plus the lease. A leader whose
// clock jumped ahead (a VM resumed with a stale clock, a bad NTP step) renews it that far ahead,
// and if it then stops (killed, partitioned) the lease row says it holds the role until its clock's
// now, a day ahead after a day's jump: no node would lead, and no schedule fire, until real time
// caught up. Comparing the row's end with this node's clock cannot tell that from a live leader
// whose clock is a little ahead. Watching it can: a live holder's lease changes every round, so
// one unchanged for a whole lease on this node's clock, yet ending in this node's future, belongs
// to a holder that stopped. takeStale takes it then, and only if the row is still that lease.
//
// A holder whose clock stays ahead and keeps renewing is left to lead, as before: its rounds fire
// only what its clock says is due, and the first round on a right clock after it pulls the
// watermarks back (rewind).

// takeStale takes the role from l's holder when its lease has not changed for a whole lease on
// this node's clock; otherwise it notes l and returns it. Called under round.
func (s *Scheduler) takeStale(ctx context.Context, l store.Leader, now time.Time) (store.Leader, error) {
	if l.Holder != s.seen.Holder || !l.Until.Equal(s.seen.Until) {
		s.seen, s.seenAt = l, now
		return l, nil
	}
	if now.Sub(s.seenAt) < s.cfg.Lease {
		return l, nil
	}
	// The store takes a lease that ended at or before Now: with Now at the end of the lease
	// watched, it takes that lease and no other (a renewal since moved its end later).
	taken, err := s.store.LeaderAcquire(ctx, store.LeaderParams{Role: Role, Holder: s.cfg.ID, Now: l.Until, Until: now.Add(s.cfg.Lease)})
	if err != nil {
		return l, err
	}
	if taken.Holder == s.cfg.ID {
		s.leaseTaken.Add(1)
		s.log.Warn("jobs.scheduler.lease-taken", "holder", l.Holder, "until", l.Until.UTC().Format(time.RFC3339),
			"now", now.UTC().Format(time.RFC3339), "unchanged", now.Sub(s.seenAt).Round(time.Second).String(),
			"reason", "the holder's lease ends in this node's future but has not been renewed for a whole lease: it was set by a clock that ran ahead, and its holder stopped")
	}
	s.seen = store.Leader{}
	return taken, nil
}
