package matching

import "github.com/ultimat3/jobs/store"

// The rotation cursor is per engine process: several engines sharing a store each rotate on
// their own, which keeps each one's claims fair and costs no shared write per claim. It is a
// hint, never a correctness matter: a lost or stale cursor only changes which tenant a round
// starts with.

// currentRotation returns the cursors to claim with; the map is never mutated after it is
// handed out (rotated replaces it).
func (s *Service) currentRotation() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rotation
}

// rotated moves the cursors of the queues a claim took runs from.
func (s *Service) rotated(runs []store.Run) {
	if len(runs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rotation = store.NextRotation(s.rotation, runs)
}
