package timers

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/store"
)

// streamStore is a store under a stream of wake-ups: each TimerFire call takes a millisecond (on
// the fake clock) and wakes one run, for `rounds` calls; there is always a timer due while the
// stream lasts. It counts the service's looks for lapsed leases.
type streamStore struct {
	store.Store // the service calls only the methods below
	clock       *clock.Fake

	mu      sync.Mutex
	rounds  int // TimerFire calls left that wake a run
	fires   int
	expires int
	during  int // expires while the stream lasted
	done    chan struct{}
}

func (s *streamStore) TimerFire(ctx context.Context, now time.Time, limit int) ([]store.Woken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fires++
	if s.rounds == 0 {
		return nil, nil
	}
	s.rounds--
	s.clock.Advance(time.Millisecond)
	if s.rounds == 0 {
		close(s.done)
	}
	return []store.Woken{{RunID: "r"}}, nil
}

func (s *streamStore) TimerNext(context.Context) (time.Time, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rounds == 0 {
		return time.Time{}, false, nil
	}
	return s.clock.Now(), true, nil
}

func (s *streamStore) RunExpireLeases(context.Context, time.Time, int) ([]store.Woken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expires++
	if s.rounds > 0 {
		s.during++
	}
	return nil, nil
}

func (s *streamStore) EventPrune(context.Context, time.Time) (int, error) { return 0, nil }

// While timers keep falling due, the service fires them round after round and looks for lapsed
// leases every expireEvery, not in every round: that look was one more statement between each
// timer falling due and its firing. A round that fires nothing still looks, so a clock that stands
// still (a test's) cannot keep a lapsed lease from being found.
func TestLeasesAreLookedForEveryExpireEveryWhileTimersFire(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := &streamStore{clock: fake, rounds: 1000, done: make(chan struct{})}
	s := New(Config{Store: st, Clock: fake, Fallback: time.Hour})
	s.Start()
	defer s.Stop()
	select {
	case <-st.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the service did not fire the stream's 1,000 rounds")
	}
	st.mu.Lock()
	during := st.during
	st.mu.Unlock()
	// 1,000 rounds of a millisecond each: a second of the service's clock, ten looks (and the
	// first round's).
	if max := int(time.Second/expireEvery) + 1; during > max {
		t.Fatalf("%d looks for lapsed leases during 1,000 rounds that each fired a timer, want at most %d (one every %s)", during, max, expireEvery)
	}
	if during == 0 {
		t.Fatal("no look for lapsed leases while the timers fired")
	}

	// The stream is over and the clock stands still: every round now fires nothing, and each
	// looks.
	st.mu.Lock()
	before := st.expires
	st.mu.Unlock()
	for i := 0; i < 3; i++ {
		s.Kick()
		deadline := time.Now().Add(5 * time.Second)
		for {
			st.mu.Lock()
			n := st.expires
			st.mu.Unlock()
			if n > before+i {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("kick %d: a round that fired nothing did not look for lapsed leases", i+1)
			}
			time.Sleep(time.Millisecond)
		}
	}
}
