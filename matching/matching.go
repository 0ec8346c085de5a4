// Package matching hands ready runs to workers: claims under a visibility lease, long-polls that
// wake when work arrives instead of spinning, and sticky dispatch (a run woken from a suspension
// is offered first to the worker that keeps it parked).
package matching

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/store"
)

// Config configures the matching service.
type Config struct {
	Store store.Store
	// Clock sets claim and lease times. Defaults to the wall clock.
	Clock clock.Clock
	// Lease is the visibility window a claim buys; a heartbeat renews it. Defaults to 30s.
	Lease time.Duration
	// StickyWindow is how long a woken run waits for the worker that keeps it parked before any
	// worker may claim it. Defaults to 2s.
	StickyWindow time.Duration
	// Fallback is the longest a long-poll sleeps without re-checking the store, which covers
	// wake-ups it cannot hear (another process without a notifier, a sticky window ending).
	// Defaults to 1s.
	Fallback time.Duration
	Logger   *slog.Logger
	// OldestFirst claims in plain oldest-ready order, without tenant rotation or priorities
	// (store.ClaimParams.OldestFirst). Defaults to false: the fair order.
	OldestFirst bool
}

// Service is the matching service.
type Service struct {
	cfg Config
	mu  sync.Mutex
	// wake is closed and replaced whenever a run woken from a suspension becomes ready (Wake):
	// every long-poll waiting on it re-checks, since only the poll of the worker keeping the run
	// parked may claim it for a while, and which one that is is the store's to know. New runs
	// wake one poll each instead (WakeQueue, wake.go).
	wake chan struct{}
	// idle are the long-polls waiting now, per queue, oldest first, and owed the wakes of new
	// runs that none of them could take (wake.go).
	idle map[string][]*waiter
	owed map[string]owed
	// seq numbers the targeted wakes.
	seq uint64
	// rotation is where each queue's last claim ended (store.ClaimParams.Rotation), so the next
	// claim's round starts after that tenant.
	rotation map[string]string
	// flights are the sets of queues with a claim in flight, and the polls gathered behind each
	// (gather.go).
	flights map[string]*inFlight
}

// New returns a matching service.
func New(cfg Config) *Service {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.StickyWindow <= 0 {
		cfg.StickyWindow = 2 * time.Second
	}
	if cfg.Fallback <= 0 {
		cfg.Fallback = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg, wake: make(chan struct{}), idle: map[string][]*waiter{}, owed: map[string]owed{},
		flights: map[string]*inFlight{}}
}

// Lease returns the visibility window of a claim.
func (s *Service) Lease() time.Duration { return s.cfg.Lease }

// Wake tells every waiting poller that runs became ready: runs woken from a suspension, which
// only the worker keeping them parked may claim for a while (WakeQueue is for new runs).
func (s *Service) Wake() {
	s.mu.Lock()
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

func (s *Service) current() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wake
}

// PollParams asks for up to Max runs of Queues for WorkerID, waiting up to Wait.
type PollParams struct {
	WorkerID string
	Queues   []string
	Max      int
	Wait     time.Duration
}

// Poll claims ready runs, long-polling up to p.Wait (wall-clock time, whatever the engine's
// clock) when none is ready.
func (s *Service) Poll(ctx context.Context, p PollParams) ([]store.Run, error) {
	if p.Max <= 0 {
		p.Max = 1
	}
	deadline := time.NewTimer(p.Wait)
	defer deadline.Stop()
	w := &waiter{queues: p.Queues, handed: make([]int, len(p.Queues)), ch: make(chan struct{}, 1)}
	took := make([]int, len(p.Queues))
	for {
		// Take the wake channel and the owed wakes before claiming, so a run made ready between
		// the claim and the wait is not missed.
		wake := s.current()
		seq := s.startClaim(p.Queues, p.Max, took)
		runs, err := s.claim(ctx, p.WorkerID, p.Queues, p.Max) // gathered with others' (gather.go)
		if err != nil {
			s.giveBack(p.Queues, took) // another poll claims what this one could not
			return nil, err
		}
		s.claimed(p.Queues, seq, len(runs), p.Max)
		if len(runs) > 0 || p.Wait <= 0 {
			return runs, nil
		}
		if !s.wait(w, p.Max) {
			continue // a wake came while the claim was in flight
		}
		fallback := time.NewTimer(s.cfg.Fallback)
		select {
		case <-wake:
		case <-w.ch:
		case <-fallback.C:
		case <-deadline.C:
			fallback.Stop()
			s.leave(w, true)
			return nil, nil
		case <-ctx.Done():
			fallback.Stop()
			s.leave(w, true)
			return nil, ctx.Err()
		}
		fallback.Stop()
		s.leave(w, false)
	}
}
