package memory

import (
	"container/heap"

	"github.com/ultimat3/jobs/store"
)

// A lane is one tenant's ready runs in one queue, in claim order (ClaimAt, then ID). The fair
// claim (store/flow.go) takes the heads of every lane of the polled queues before the second run
// of any, so it reads O(lanes × limit) runs, never the backlog.

func laneLess(a, b *runRec) bool {
	ca, cb := store.ClaimAt(a.run.ReadyAt, a.run.Priority), store.ClaimAt(b.run.ReadyAt, b.run.Priority)
	if !ca.Equal(cb) {
		return ca.Before(cb)
	}
	return a.run.ID < b.run.ID
}

func newLaneHeap() *runHeap {
	return &runHeap{less: laneLess, at: func(r *runRec) *int { return &r.laneIdx }}
}

func (s *Store) indexLane(r *runRec) {
	q := s.lanes[r.run.Queue]
	if q == nil {
		q = map[string]*runHeap{}
		s.lanes[r.run.Queue] = q
	}
	h := q[r.run.Tenant]
	if h == nil {
		h = newLaneHeap()
		q[r.run.Tenant] = h
	}
	heap.Push(h, r)
}

func (s *Store) unindexLane(r *runRec) {
	q := s.lanes[r.run.Queue]
	h := q[r.run.Tenant]
	heap.Remove(h, r.laneIdx)
	if h.Len() == 0 {
		delete(q, r.run.Tenant)
	}
}

// claimFair claims in the fair order (store/flow.go). The caller holds the lock.
func (s *Store) claimFair(p store.ClaimParams) []store.Run {
	var cands []store.Run
	recs := map[string]*runRec{}
	limit := p.Total()
	seen := map[string]bool{}
	// A lane's heap is popped as its runs are taken (and pushed back at the end), so a second
	// take from it (the top-up, rule 3) goes on where the first stopped.
	type lane struct {
		h      *runHeap
		popped []*runRec
		full   bool // it gave its whole share
	}
	var lanes []*lane
	take := func(l *lane, n int) int {
		taken := 0
		for taken < n && l.h.Len() > 0 {
			r := heap.Pop(l.h).(*runRec)
			l.popped = append(l.popped, r)
			if p.Claimable(r.run.WorkerID, r.run.ReadyAt) {
				cands = append(cands, r.run)
				recs[r.run.ID] = r
				taken++
			}
		}
		return taken
	}
	for _, q := range p.Queues {
		if seen[q] {
			continue
		}
		seen[q] = true
		tenants := make([]string, 0, len(s.lanes[q]))
		for t := range s.lanes[q] {
			tenants = append(tenants, t)
		}
		cursor, has := p.Rotation[q]
		store.RotationOrder(tenants, cursor, has)
		if len(tenants) > limit {
			tenants = tenants[:limit]
		}
		share := store.LaneShare(limit, len(tenants))
		for _, t := range tenants {
			l := &lane{h: s.lanes[q][t]}
			lanes = append(lanes, l)
			l.full = take(l, share) == share
		}
	}
	if short := limit - len(cands); short > 0 {
		for _, l := range lanes {
			if l.full {
				take(l, short)
			}
		}
	}
	// Every popped run goes back before the chosen ones leave their lanes (claimChosen).
	for _, l := range lanes {
		for _, r := range l.popped {
			heap.Push(l.h, r)
		}
	}
	store.ClaimOrder(cands, p)
	if len(cands) > limit {
		cands = cands[:limit]
	}
	chosen := make([]*runRec, len(cands))
	for i, c := range cands {
		chosen[i] = recs[c.ID]
	}
	return s.claimChosen(p, chosen)
}
