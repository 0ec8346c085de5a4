package engine

import (
	"context"
	"time"

	"github.com/ultimat3/jobs"
)

// A worker start or stop hands back every claim held under its worker id, and the id is only a
// name the caller sends: any holder of a worker credential could name another worker's id and
// release (then claim for itself) the runs that worker is executing. The lease token cannot
// guard it, because a restarted process must release what its dead predecessor held without
// knowing its tokens. What tells a predecessor that died from a worker that is alive is the
// session: a live worker keeps one attended. So a start or stop is refused (X_WORKER_LIVE)
// while a session under that id is attended, or was answered moments ago (the worker attends
// again at once). A dropped session (the process died, or stopped cleanly and cut it) is not
// live, so the restart and the clean stop go through.
//
// Limits: the engine knows the sessions attended on itself. Just after an engine restart, until
// the workers attend again (within about a second), and with several engine processes behind one
// address, a start or stop may come where the session is not seen; likewise between a worker's
// answered start and its first attend, while its pollers may already claim; two processes that
// share a worker id are one worker to the engine.

// reattendWindow is how long after an answered attend the worker counts as live: it attends
// again at once, so this only covers the round trip.
const reattendWindow = 3 * time.Second

// stopRace bounds how long a stop waits for a session under its id to drop: a worker's clean
// stop cuts its attend and then sends the stop on another connection, which may arrive first.
const stopRace = 500 * time.Millisecond

type liveness struct {
	attending int
	answered  time.Time // when an attend last ended with its wait passed; zero after a drop
	changed   chan struct{}
}

// live returns the id's record, created on demand. Called with s.mu held.
func (s *sessions) live(workerID string) *liveness {
	if s.lives == nil {
		s.lives = map[string]*liveness{}
	}
	l := s.lives[workerID]
	if l == nil {
		l = &liveness{changed: make(chan struct{})}
		s.lives[workerID] = l
	}
	return l
}

// opened records an attend begun under workerID.
func (s *sessions) opened(workerID string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now)
	s.live(workerID).attending++
}

// ended records an attend under workerID ended: answered (the wait passed, the worker attends
// again) or dropped. It returns how many attends under the id are still open.
func (s *sessions) ended(workerID string, answered bool, now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now)
	l := s.live(workerID)
	l.attending = max(l.attending-1, 0)
	if answered {
		l.answered = now
	} else {
		l.answered = time.Time{}
	}
	if l.attending == 0 && l.answered.IsZero() {
		delete(s.lives, workerID)
	}
	close(l.changed)
	l.changed = make(chan struct{})
	return l.attending
}

// isLive reports whether a session under workerID is attended or was answered within the
// window, and a channel closed at its next change.
func (s *sessions) isLive(workerID string, now time.Time) (bool, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now)
	l := s.lives[workerID]
	if l == nil {
		return false, nil
	}
	if l.lapsed(now) {
		s.forget(workerID, l)
		return false, nil
	}
	return true, l.changed
}

// lapsed reports whether a record says nothing any more: no attend is open under its id and
// the last answered one is past the re-attend window (so the id is not live, and its worker,
// had it attended again, would have a fresh record).
func (l *liveness) lapsed(now time.Time) bool {
	return l.attending == 0 && (l.answered.IsZero() || now.Sub(l.answered) >= reattendWindow)
}

// forget drops a lapsed record; whoever waits on its change looks again. Called with s.mu held.
func (s *sessions) forget(workerID string, l *liveness) {
	delete(s.lives, workerID)
	close(l.changed)
}

// sweep forgets the lapsed records, at most once per re-attend window, on the calls that touch
// the table. An answered attend keeps its record for the window only: a worker that stops
// attending (or ids that attend once, each under another name) must not grow the table for
// good, and neither a goroutine nor a timer per record is spent on it. A record forgotten is
// one that was no longer live, so no rule changes: a drop beside an open attend still finds it
// open, and a drop still schedules its release after the grace (sessions.go). Called with s.mu
// held.
func (s *sessions) sweep(now time.Time) {
	if !s.swept.IsZero() && now.Sub(s.swept) < reattendWindow && !now.Before(s.swept) {
		return
	}
	s.swept = now
	for id, l := range s.lives {
		if l.lapsed(now) {
			s.forget(id, l)
		}
	}
}

// checkNotLive refuses a start or stop of a worker whose session is live. A stop waits up to
// stopRace for a live session to drop first (see stopRace).
func (e *Engine) checkNotLive(ctx context.Context, workerID, what string, wait bool) error {
	var deadline <-chan time.Time
	for {
		live, changed := e.sessions.isLive(workerID, e.clock.Now())
		if !live {
			return nil
		}
		if !wait {
			break
		}
		if deadline == nil {
			t := time.NewTimer(stopRace)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-changed:
			continue
		case <-deadline:
		case <-ctx.Done():
			return ctx.Err()
		}
		break
	}
	return jobs.Errorf(jobs.CodeWorkerLive, "worker %s has a live session on this engine; a %s under its id comes only from that process", workerID, what)
}

// SessionAnswered records that a remote worker's attend ended with its wait passed (the worker
// attends again at once): its session counts as live meanwhile. An id SessionOpened would not
// record is ignored.
func (e *Engine) SessionAnswered(workerID string) {
	if checkWorker(workerID) != nil {
		return
	}
	e.sessions.ended(workerID, true, e.clock.Now())
}

// SessionLive reports whether a worker under workerID attends a session on this engine (or was
// answered within the re-attend window): what a start or stop under that id is refused for
// (X_WORKER_LIVE). A worker attends right after its start, so a moment passes between the start
// and the first moment its session is live.
func (e *Engine) SessionLive(workerID string) bool {
	live, _ := e.sessions.isLive(workerID, e.clock.Now())
	return live
}
