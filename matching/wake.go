package matching

// Targeted wakes. Wake tells every waiting long-poll to claim again, which a run woken from a
// suspension needs: only the worker that keeps it parked may claim it during the sticky window,
// and the engine does not know which of the waiting polls is that worker's. A new run has no
// such holder, so any one poll of its queue can claim it; waking them all sent every waiting
// poll to the store for one run, so with N workers waiting each new run cost N claims (eight
// workers, twenty runs: 180 claims, against 40–52 with the wake handed to one poll).
//
// WakeQueue hands a queue's wakes to its waiting polls one run at a time, oldest poll first,
// each taking up to its Max; what no waiting poll can take is owed to the queue, and the next
// poll of the queue that would wait claims again instead. The rules that keep a ready run from
// waiting for the fallback:
//   - a claim covers every wake issued before it started, so a poll about to start a claim takes
//     the owed wakes of its queues (up to its Max);
//   - a wake that reaches a poll while its claim is in flight is owed (the claim may have read
//     the queue before the run was committed), so the poll claims again rather than wait;
//   - a claim that comes back full may have left ready runs behind: it passes one wake on;
//   - a poll that stops waiting without claiming (its deadline, its caller gone) gives the wakes
//     it was handed back to the queue.
// An empty claim clears what its queues owed before it started, so owed wakes whose runs another
// engine claimed do not send polls to the store again and again.

// maxOwed bounds a queue's owed wakes; past it, one more changes nothing that matters (a poll
// claims again whenever any is owed).
const maxOwed = 1 << 30

// waiter is one long-poll between its claims.
type waiter struct {
	queues []string
	// max is its poll's Max: it takes that many wakes at most (room).
	max int
	// handed counts the wakes handed to it, by its queues' positions; given back if it leaves
	// without claiming.
	handed []int
	// ch is signalled when a wake is handed to it.
	ch chan struct{}
	// waiting is true while it is in the idle lists.
	waiting bool
}

// room is how many more wakes w takes: its Max less those handed to it.
func (w *waiter) room() int {
	n := w.max
	for _, k := range w.handed {
		n -= k
	}
	return n
}

// owed is a queue's wakes that no waiting poll could take.
type owed struct {
	n int
	// seq is the wake sequence of the last wake owed: an empty claim clears the count only if it
	// started after that.
	seq uint64
}

// WakeQueue says that n runs of queue became ready that any worker polling it may claim (new
// runs, held by no worker): they are handed to as few waiting polls as can take them.
func (s *Service) WakeQueue(queue string, n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wakeLocked(queue, n)
}

func (s *Service) wakeLocked(queue string, n int) {
	s.seq++
	for n > 0 && len(s.idle[queue]) > 0 {
		w := s.idle[queue][0]
		k := min(n, w.room())
		n -= k
		for i, q := range w.queues {
			if q == queue {
				w.handed[i] += k
				break
			}
		}
		select {
		case w.ch <- struct{}{}:
		default:
		}
		if w.room() == 0 {
			s.unidleLocked(w)
		}
	}
	if n > 0 {
		o := s.owed[queue]
		o.n, o.seq = min(o.n+n, maxOwed), s.seq
		s.owed[queue] = o
	}
}

// startClaim is called as a poll starts a claim: the claim covers the wakes owed to its queues
// so far, up to max of them. It returns the wake sequence the claim started at and what it took
// of each queue's wakes, which a claim that fails gives back (giveBack).
func (s *Service) startClaim(queues []string, max int, took []int) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, q := range queues {
		took[i] = 0
		o, ok := s.owed[q]
		if !ok || max == 0 {
			continue
		}
		k := min(o.n, max)
		max -= k
		took[i] = k
		if o.n -= k; o.n == 0 {
			delete(s.owed, q)
		} else {
			s.owed[q] = o
		}
	}
	return s.seq
}

// giveBack returns wakes a poll took or was handed, by its queues' positions, to the queues.
func (s *Service) giveBack(queues []string, wakes []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.giveBackLocked(queues, wakes)
}

func (s *Service) giveBackLocked(queues []string, wakes []int) {
	for i, k := range wakes {
		if k > 0 {
			s.wakeLocked(queues[i], k)
		}
	}
	clear(wakes)
}

// claimed is called after a claim of a poll that started at seq: an empty one clears what its
// queues owed before it started; a full one passes a wake on to each of its queues.
func (s *Service) claimed(queues []string, seq uint64, got, max int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case got == 0:
		for _, q := range queues {
			if o, ok := s.owed[q]; ok && o.seq <= seq {
				delete(s.owed, q)
			}
		}
	case got >= max:
		for _, q := range queues {
			s.wakeLocked(q, 1)
		}
	}
}

// wait puts w in the idle lists of its queues, unless one of them is owed a wake: then it
// returns false and the poll claims again at once.
func (s *Service) wait(w *waiter, max int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range w.queues {
		if s.owed[q].n > 0 {
			return false
		}
	}
	w.max, w.waiting = max, true
	clear(w.handed)
	select { // a signal left from before this wait
	case <-w.ch:
	default:
	}
	for _, q := range w.queues {
		s.idle[q] = append(s.idle[q], w)
	}
	return true
}

// leave takes w out of the idle lists after its wait. If it is not going to claim (give is
// true), the wakes it was handed go back to their queues.
func (s *Service) leave(w *waiter, give bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unidleLocked(w)
	if give {
		s.giveBackLocked(w.queues, w.handed)
	}
	clear(w.handed)
}

func (s *Service) unidleLocked(w *waiter) {
	if !w.waiting {
		return
	}
	w.waiting = false
	for _, q := range w.queues {
		ws := s.idle[q]
		for i, x := range ws {
			if x == w {
				ws = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(s.idle, q)
		} else {
			s.idle[q] = ws
		}
	}
}
