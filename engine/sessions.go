package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
)

// A worker's session lets the engine hand back what a gone worker held at once, rather than when
// its leases lapse (30s by default):
//   - WorkerStart: a process starting under an id releases what an earlier process left under it;
//   - WorkerStop: a clean stop releases the claims still held and the sticky reservations, so a
//     woken run does not wait out the sticky window for a worker that left;
//   - a remote session whose connection drops without WorkerStop (the process was killed: its
//     kernel closes the sockets at once) releases after SessionGrace, unless the worker attends
//     again first (a connection cut by the network, not by a death).
//
// The drop is noticed on the connection the worker already keeps open, so fast reclaim costs no
// extra heartbeats: one long-held request per worker per MaxPollWait.

// sessions tracks the releases pending after dropped sessions, per worker id.
type sessions struct {
	mu      sync.Mutex
	pending map[string]chan struct{} // closed to cancel the pending release
	lives   map[string]*liveness     // the sessions attended now or just answered (sessions_live.go)
	swept   time.Time                // when lives was last rid of its lapsed records (sessions_live.go)
}

// cancelAll drops every pending release: the engine is stopping, and its sessions dropping says
// nothing of the workers.
func (s *sessions) cancelAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, c := range s.pending {
		close(c)
		delete(s.pending, id)
	}
}

func (s *sessions) cancel(workerID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.pending[workerID]; ok {
		close(c)
		delete(s.pending, workerID)
	}
}

// WorkerStart implements frontend.Sessions.
func (e *Engine) WorkerStart(ctx context.Context, s frontend.Session) error {
	if err := checkWorker(s.WorkerID); err != nil {
		return err
	}
	if err := e.checkNotLive(ctx, s.WorkerID, "start", false); err != nil {
		return err
	}
	e.sessions.cancel(s.WorkerID)
	return e.releaseWorker(ctx, s.WorkerID, "start")
}

// WorkerStop implements frontend.Sessions.
func (e *Engine) WorkerStop(ctx context.Context, s frontend.Session) error {
	if err := checkWorker(s.WorkerID); err != nil {
		return err
	}
	if err := e.checkNotLive(ctx, s.WorkerID, "stop", true); err != nil {
		return err
	}
	e.sessions.cancel(s.WorkerID)
	return e.releaseWorker(ctx, s.WorkerID, "stop")
}

// Attend implements frontend.Sessions for an in-process worker: it holds until s.Wait passes or
// ctx ends. An in-process worker cannot die without its engine, so its session
// never drops; the HTTP API calls SessionOpened and SessionDropped for remote ones.
func (e *Engine) Attend(ctx context.Context, s frontend.Session) error {
	if err := checkWorker(s.WorkerID); err != nil {
		return err
	}
	e.sessions.cancel(s.WorkerID)
	wait := s.Wait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	t := e.clock.NewTimer(wait)
	defer t.Stop()
	e.sessions.opened(s.WorkerID, e.clock.Now())
	select {
	case <-t.C():
		e.sessions.ended(s.WorkerID, true, e.clock.Now())
	case <-ctx.Done():
		e.sessions.ended(s.WorkerID, false, e.clock.Now())
	}
	return nil
}

// SessionOpened records that a remote worker attends: a release pending after its previous
// session dropped is cancelled. An id no session may have (see checkWorker) is not recorded,
// and its answer and drop are ignored alike.
func (e *Engine) SessionOpened(workerID string) {
	if checkWorker(workerID) != nil {
		return
	}
	e.sessions.cancel(workerID)
	e.sessions.opened(workerID, e.clock.Now())
}

// SessionDropped records that a remote worker's session connection dropped without a clean
// stop: unless another attend under its id is still open, or the worker attends, starts or stops
// again within SessionGrace, what it held is released.
func (e *Engine) SessionDropped(workerID string) {
	if checkWorker(workerID) != nil {
		return
	}
	if e.sessions.ended(workerID, false, e.clock.Now()) > 0 {
		// Another attend under the id is still open: the worker is alive. A drop is reported for
		// whichever connection closed, and anyone with a worker credential can open (and close)
		// an attend under any id, so a drop beside a live attend must not hand back the live
		// worker's claims; when that attend drops too, its own drop releases them.
		return
	}
	e.mu.Lock()
	if !e.started {
		e.mu.Unlock()
		return // stopping: the drop is this engine's, not the worker's
	}
	e.wg.Add(1)
	e.mu.Unlock()
	cancel := make(chan struct{})
	e.sessions.mu.Lock()
	if e.sessions.pending == nil {
		e.sessions.pending = map[string]chan struct{}{}
	}
	if old, ok := e.sessions.pending[workerID]; ok {
		close(old)
	}
	e.sessions.pending[workerID] = cancel
	e.sessions.mu.Unlock()

	t := e.clock.NewTimer(e.cfg.SessionGrace)
	go func() {
		defer e.wg.Done()
		defer t.Stop()
		select {
		case <-cancel:
			return
		case <-t.C():
		}
		e.sessions.mu.Lock()
		mine := e.sessions.pending[workerID] == cancel
		if mine {
			delete(e.sessions.pending, workerID)
		}
		e.sessions.mu.Unlock()
		e.mu.Lock()
		running := e.started
		e.mu.Unlock()
		if !mine || !running {
			return // superseded, or this engine is stopping: its drops say nothing of the worker
		}
		ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		if err := e.releaseWorker(ctx, workerID, "dropped"); err != nil {
			// The leases still lapse on their own.
			e.log.Warn("jobs.worker.release-failed", "worker", workerID, "err", err)
		}
	}()
}

func (e *Engine) releaseWorker(ctx context.Context, workerID, why string) error {
	woken, err := e.store.WorkerRelease(ctx, workerID, e.clock.Now())
	if err != nil {
		return err
	}
	if len(woken) > 0 {
		e.matching.Wake()
	}
	// A claim taken back from a running body is a lease lost, as one that lapsed is: the body may
	// run again elsewhere, and the worker that held it is gone (or stopped) and counts nothing.
	// So it is as loud as a lapsed lease (jobs.lease.expired): a warning.
	reclaimed := e.metrics.reclaimed(woken)
	level := slog.LevelInfo
	if reclaimed > 0 {
		level = slog.LevelWarn
	}
	e.log.Log(ctx, level, "jobs.worker.released", "worker", workerID, "why", why, "runs", len(woken), "reclaimed", reclaimed)
	return nil
}

// checkWorker refuses a session's worker id that is empty or that no store could hold as a
// name (jobs.ValidIdentifier: at most 1,000 bytes of UTF-8 without NUL). The engine keeps a
// record per id while its session is live, so the bound is also what one session may pin; it
// is checked here, not only in the HTTP API, because in-process callers send ids too.
func checkWorker(id string) error {
	if id == "" {
		return jobs.Errorf(jobs.CodeBadRequest, "a worker session needs the worker's id")
	}
	return jobs.ValidIdentifier("worker id", id)
}

var _ frontend.Sessions = (*Engine)(nil)
