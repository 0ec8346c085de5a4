package worker

import (
	"sync"

	"github.com/ultimat3/jobs"
)

// Claiming ahead: a claim's last record (complete, fail, block) waits for a group commit like
// every step, and only when its answer is back did the claim's slot free and the poller ask for
// the next run. The slot then stood empty for that commit and for the claim after it, and its
// next run's first step missed the commits in between. With it, the slot is given back as the
// last record is sent: the body has returned by then, so no more bodies run at once than the
// queue's concurrency, and the next run is claimed while the last one's commit is in flight.
//
// What is not counted any more is the wait for that record's answer. A job under a limit the
// engine counts per running run (a fleet cap, a keyed limit) or a process budget per tenant
// keeps the slot to the end: its next claim would find the finishing run still counted and be
// handed back, delayed, instead of run.

// slot is one of a queue's execution slots, held by one claim; give returns it to the poller,
// once, whichever of the claim's end or its last record comes first.
type slot struct {
	once  sync.Once
	slots chan struct{}
}

func (s *slot) give() { s.once.Do(func() { <-s.slots }) }

// claimsAhead says whether the slot of a claim of def may be given back at its last record.
func (w *Worker) claimsAhead(def jobs.Definition) bool {
	if w.cfg.NoClaimAhead {
		return false
	}
	c := def.Config()
	if c.Concurrency > 0 || c.KeyedConcurrency != nil || c.KeyedRate != nil {
		return false
	}
	l := w.cfg.Limits
	return l.PerTenant <= 0 && l.RatePerTenant.N <= 0
}
