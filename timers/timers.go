// Package timers is the timer service: it fires due durable timers (sleep wake-ups, event-wait
// timeouts, retry backoffs, delayed enqueues) in batches, makes lapsed leases claimable again, and
// prunes published events past the lookback window. It sleeps until the next due time, a kick
// (a nearer timer was armed) or a fallback interval, never in a tight loop.
package timers

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/store"
)

// Config configures the timer service.
type Config struct {
	Store store.Store
	// Clock decides what is due. Defaults to the wall clock.
	Clock clock.Clock
	// Batch is how many timers one store call fires. Defaults to 512.
	Batch int
	// Fallback is the longest the service sleeps without looking, which bounds how late it
	// notices a timer armed by another process without a notifier, and a lapsed lease.
	// Defaults to 1s.
	Fallback time.Duration
	// Retention is how long published events are kept for late waits (the lookback window).
	// Defaults to 5m.
	Retention time.Duration
	// OnWake is told of runs that became ready.
	OnWake func([]store.Woken)
	// OnExpired is told of runs whose lapsed lease was reclaimed (after OnWake); optional.
	OnExpired func([]store.Woken)
	// OnLag is told how late the earliest due timer of a round fired (from its DueAt to the end of
	// the round's firing), for every round that fired one; optional.
	OnLag  func(time.Duration)
	Logger *slog.Logger
}

// Service is the timer service.
type Service struct {
	cfg  Config
	kick chan struct{}
	stop context.CancelFunc
	wg   sync.WaitGroup
	// round is held for a round of firing and expiring, by the loop and by Tick. The stores
	// fire and expire under SKIP LOCKED, so a Tick that ran beside the loop's round would pass
	// over the rows that round holds and return before they commit: its caller (a test that
	// moved a fake clock, the CLI's one-shot maintenance) would see a lapsed lease still held.
	round sync.Mutex
}

// New returns a timer service; Start runs it.
func New(cfg Config) *Service {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 512
	}
	if cfg.Fallback <= 0 {
		cfg.Fallback = time.Second
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 5 * time.Minute
	}
	if cfg.OnWake == nil {
		cfg.OnWake = func([]store.Woken) {}
	}
	if cfg.OnExpired == nil {
		cfg.OnExpired = func([]store.Woken) {}
	}
	if cfg.OnLag == nil {
		cfg.OnLag = func(time.Duration) {}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg, kick: make(chan struct{}, 1)}
}

// Kick makes the service look again now: a timer nearer than the one it sleeps for was armed.
func (s *Service) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Start runs the service until Stop.
func (s *Service) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.loop(ctx)
	}()
}

// Stop ends the service and waits for the round in flight.
func (s *Service) Stop() {
	if s.stop != nil {
		s.stop()
		s.wg.Wait()
	}
}

func (s *Service) loop(ctx context.Context) {
	var lastPrune, lastExpire time.Time
	for ctx.Err() == nil {
		s.round.Lock()
		now := s.cfg.Clock.Now()
		fired := s.fire(ctx, now)
		// While timers keep falling due, lapsed leases are looked for every expireEvery, not
		// every round; a round that fired nothing always looks.
		if fired == 0 || now.Sub(lastExpire) >= expireEvery || now.Before(lastExpire) {
			lastExpire = now
			s.expire(ctx, now)
		}
		s.round.Unlock()
		if now.Sub(lastPrune) > time.Minute {
			lastPrune = now
			if _, err := s.cfg.Store.EventPrune(ctx, now.Add(-s.cfg.Retention)); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("jobs.timers.prune-failed", "err", err)
			}
		}
		var due clock.Timer
		var dueC <-chan time.Time
		if next, ok, err := s.cfg.Store.TimerNext(ctx); err == nil && ok {
			due = s.cfg.Clock.NewTimer(next.Sub(s.cfg.Clock.Now()))
			dueC = due.C()
		}
		fallback := time.NewTimer(s.cfg.Fallback)
		select {
		case <-ctx.Done():
		case <-dueC:
		case <-s.kick:
		case <-fallback.C:
		}
		fallback.Stop()
		if due != nil {
			due.Stop()
		}
	}
}

// expireEvery is how often, at most, the service looks for lapsed leases while timers keep it
// firing. A lease lasts seconds (30 by default), so a lapse found a tenth of a second later
// changes nothing; looking in every round was one more statement between a timer falling due and
// its firing, and under a stream of wake-ups (a round every few milliseconds) most of what the
// service asked the store was this look, which almost always finds nothing.
const expireEvery = 100 * time.Millisecond

// Tick fires everything due at now and expires lapsed leases. It is exported for tests and for
// the `engine` CLI's one-shot maintenance.
//
// It waits for the loop's round in flight, so what that round holds is committed, and settled,
// when Tick returns.
func (s *Service) Tick(ctx context.Context, now time.Time) {
	s.round.Lock()
	defer s.round.Unlock()
	s.fire(ctx, now)
	s.expire(ctx, now)
}

// fire fires everything due at now, in batches, returns how many runs it woke, and tells OnLag
// how late the earliest of their timers fired.
//
// The lag is read from the fired timers' own due times, not from the due time the service slept
// for: a round also fires timers it did not sleep for (armed after its look at the next one, by
// another engine process without a notifier, or overdue when the engine starts after an outage),
// and those are the latest; measured only for the timer slept for, they went unseen.
func (s *Service) fire(ctx context.Context, now time.Time) (woke int) {
	var earliest time.Time
	defer func() {
		if !earliest.IsZero() {
			s.cfg.OnLag(max(s.cfg.Clock.Now().Sub(earliest), 0))
		}
	}()
	for ctx.Err() == nil {
		woken, err := s.cfg.Store.TimerFire(ctx, now, s.cfg.Batch)
		if err != nil {
			if ctx.Err() == nil {
				s.cfg.Logger.Warn("jobs.timers.fire-failed", "err", err)
			}
			break
		}
		woke += len(woken)
		for _, w := range woken {
			if !w.DueAt.IsZero() && (earliest.IsZero() || w.DueAt.Before(earliest)) {
				earliest = w.DueAt
			}
		}
		if len(woken) > 0 {
			s.cfg.OnWake(woken)
		}
		if len(woken) < s.cfg.Batch {
			break
		}
	}
	return woke
}

// expire makes runs whose lease lapsed before now claimable again.
func (s *Service) expire(ctx context.Context, now time.Time) {
	woken, err := s.cfg.Store.RunExpireLeases(ctx, now, s.cfg.Batch)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("jobs.timers.expire-failed", "err", err)
		}
		return
	}
	if len(woken) > 0 {
		s.cfg.Logger.Warn("jobs.lease.expired", "runs", len(woken))
		s.cfg.OnWake(woken)
		s.cfg.OnExpired(woken)
	}
}
