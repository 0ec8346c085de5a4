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

// lateStore holds one timer that the service never saw coming: TimerNext does not report it
// (another engine process armed it, without a notifier) and it is already 5 s overdue when
// TimerFire finds it.
type lateStore struct {
	store.Store
	clock *clock.Fake
	mu    sync.Mutex
	due   time.Time // zero once fired
}

func (s *lateStore) TimerFire(_ context.Context, now time.Time, _ int) ([]store.Woken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.due.IsZero() || s.due.After(now) {
		return nil, nil
	}
	w := store.Woken{RunID: "r", DueAt: s.due}
	s.due = time.Time{}
	s.clock.Advance(20 * time.Millisecond) // the fire itself takes time on the service's clock
	return []store.Woken{w}, nil
}

func (s *lateStore) TimerNext(context.Context) (time.Time, bool, error) {
	return time.Time{}, false, nil
}
func (s *lateStore) RunExpireLeases(context.Context, time.Time, int) ([]store.Woken, error) {
	return nil, nil
}
func (s *lateStore) EventPrune(context.Context, time.Time) (int, error) { return 0, nil }

// A timer fired in a round that did not sleep for it is measured too, from its own due time to
// the end of the firing: the lag of a timer the service was told of late (or found overdue after
// an outage) is the lag operators most need to see, and measuring only the timer slept for
// reported nothing for it.
func TestLagIsMeasuredForATimerTheServiceDidNotSleepFor(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	st := &lateStore{clock: fake}
	lags := make(chan time.Duration, 4)
	s := New(Config{Store: st, Clock: fake, Fallback: time.Hour, OnLag: func(d time.Duration) { lags <- d }})
	s.Start()
	defer s.Stop()

	st.mu.Lock()
	st.due = start.Add(time.Second)
	st.mu.Unlock()
	fake.Advance(6 * time.Second)
	s.Kick()
	select {
	case d := <-lags:
		if want := 5*time.Second + 20*time.Millisecond; d != want {
			t.Fatalf("lag %s, want %s (due 5 s before the round, which took 20 ms to fire it)", d, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no lag reported for a timer fired 5 s late in a round that did not sleep for it")
	}
	select {
	case d := <-lags:
		t.Fatalf("a second lag (%s) with nothing else fired", d)
	case <-time.After(50 * time.Millisecond):
	}
}

// heldStore has one lapsed lease. Its first look for lapsed leases (the loop's) holds the row
// until released, as a Postgres transaction holds it; a second look meanwhile passes over it,
// as SKIP LOCKED does, and finds nothing.
type heldStore struct {
	store.Store
	entered, release chan struct{}

	mu       sync.Mutex
	looks    int
	expired  bool // committed
	reported bool // the woken run was handed to OnWake
}

func (s *heldStore) TimerFire(context.Context, time.Time, int) ([]store.Woken, error) {
	return nil, nil
}
func (s *heldStore) TimerNext(context.Context) (time.Time, bool, error) {
	return time.Time{}, false, nil
}
func (s *heldStore) EventPrune(context.Context, time.Time) (int, error) { return 0, nil }

func (s *heldStore) RunExpireLeases(context.Context, time.Time, int) ([]store.Woken, error) {
	s.mu.Lock()
	s.looks++
	first := s.looks == 1
	s.mu.Unlock()
	if !first {
		return nil, nil // the row is locked by the first look, or already expired
	}
	close(s.entered)
	<-s.release
	s.mu.Lock()
	s.expired = true
	s.mu.Unlock()
	return []store.Woken{{RunID: "r"}}, nil
}

// Tick waits for the loop's round in flight: a Tick beside it passed over the lease that round
// held and returned before it committed, so a test that moved its fake clock past a lease and
// ticked then found the run still held (and a poll claimed nothing) now and then on Postgres.
func TestTickWaitsForTheRoundInFlight(t *testing.T) {
	st := &heldStore{entered: make(chan struct{}), release: make(chan struct{})}
	s := New(Config{Store: st, Fallback: time.Hour, OnWake: func([]store.Woken) {
		st.mu.Lock()
		st.reported = true
		st.mu.Unlock()
	}})
	s.Start()
	defer s.Stop()
	var release sync.Once
	free := func() { release.Do(func() { close(st.release) }) }
	defer free() // before Stop, which waits for the held round
	select {
	case <-st.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not look for lapsed leases")
	}
	ticked := make(chan struct{})
	go func() {
		s.Tick(context.Background(), time.Now())
		close(ticked)
	}()
	select {
	case <-ticked:
		t.Fatal("Tick returned while the loop's round still held the lapsed lease")
	case <-time.After(50 * time.Millisecond):
	}
	free()
	select {
	case <-ticked:
	case <-time.After(10 * time.Second):
		t.Fatal("Tick did not return after the loop's round ended")
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.expired || !st.reported {
		t.Fatalf("Tick returned before the round's lease was expired (%v) and reported (%v)", st.expired, st.reported)
	}
}
