package matching

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ultimat3/jobs/store"
)

// gathered waits until n polls are gathered behind the claim of queue q in flight.
func gathered(t *testing.T, s *Service, n int) {
	t.Helper()
	eventually(t, "polls gathered", func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		if f := s.flights["q"]; f != nil && f.next != nil {
			return len(f.next.polls)
		}
		return 0
	}, n)
}

type polled struct {
	runs []store.Run
	err  error
}

// pollAs starts a poll of queue q for worker, Max max, that does not wait for runs.
func pollAs(ctx context.Context, s *Service, worker string, max int) <-chan polled {
	out := make(chan polled, 1)
	go func() {
		runs, err := s.Poll(ctx, PollParams{WorkerID: worker, Queues: []string{"q"}, Max: max})
		out <- polled{runs, err}
	}()
	return out
}

// joins starts a poll for worker (Max max) on ctx and waits until it is gathered, the n-th.
func joins(ctx context.Context, t *testing.T, s *Service, worker string, max, n int) <-chan polled {
	t.Helper()
	ch := pollAs(ctx, s, worker, max)
	gathered(t, s, n)
	return ch
}

func result(t *testing.T, ch <-chan polled) polled {
	t.Helper()
	select {
	case p := <-ch:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("a poll did not return within 10s")
		return polled{}
	}
}

// heldClaim adds n runs and starts a poll of worker "a" (Max max) whose claim is held in flight
// until release is closed: the polls after it gather behind it.
func heldClaim(t *testing.T, n, max int) (st *queueStore, s *Service, first <-chan polled, release chan struct{}) {
	t.Helper()
	st, s = newTestService()
	st.add("q", n)
	release = make(chan struct{})
	st.after = func() { <-release }
	first = pollAs(t.Context(), s, "a", max)
	eventually(t, "claims in flight", func() int { return int(st.claims.Load()) }, 1)
	return st, s, first, release
}

func (q *queueStore) left() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ready)
}

// wantFor checks that a poll got n runs, each stamped with its worker.
func wantFor(t *testing.T, who string, p polled, worker string, n int) {
	t.Helper()
	if p.err != nil {
		t.Fatalf("%s: %v", who, p.err)
	}
	if len(p.runs) != n {
		t.Errorf("%s: %d runs, want %d", who, len(p.runs), n)
	}
	for _, r := range p.runs {
		if r.WorkerID != worker {
			t.Errorf("%s: run %s claimed for %q, want %q", who, r.ID, r.WorkerID, worker)
		}
	}
}

// The polls of several workers that arrive while a claim is in flight make one claim together
// when it ends, each worker's runs stamped with its id; the polls of one worker split its share.
func TestPollsGatherBehindTheClaimInFlight(t *testing.T) {
	st, s, first, release := heldClaim(t, 20, 2)
	b := joins(t.Context(), t, s, "b", 3, 1)
	c1 := joins(t.Context(), t, s, "c", 4, 2)
	c2 := joins(t.Context(), t, s, "c", 5, 3)
	close(release)

	wantFor(t, "the first poll", result(t, first), "a", 2)
	wantFor(t, "b's poll", result(t, b), "b", 3)
	wantFor(t, "c's first poll", result(t, c1), "c", 4)
	wantFor(t, "c's second poll", result(t, c2), "c", 5)
	if got := st.claims.Load(); got != 2 {
		t.Errorf("%d claims for four polls, want 2: one in flight, one for the three gathered behind it", got)
	}
	if left := st.left(); left != 20-14 {
		t.Errorf("%d runs left ready, want %d", left, 20-14)
	}
	s.mu.Lock()
	if len(s.flights) != 0 {
		t.Errorf("%d claims still marked in flight after every poll returned", len(s.flights))
	}
	s.mu.Unlock()
}

// A poll whose caller leaves before its gathered claim starts is taken out of it: nothing is
// claimed for it.
func TestAPollThatLeavesBeforeItsGatheredClaimIsNotClaimedFor(t *testing.T) {
	st, s, first, release := heldClaim(t, 20, 2)
	ctx, cancel := context.WithCancel(t.Context())
	gone := joins(ctx, t, s, "b", 5, 1)
	stays := joins(t.Context(), t, s, "c", 3, 2)
	cancel()
	if p := result(t, gone); !errors.Is(p.err, context.Canceled) || len(p.runs) != 0 {
		t.Errorf("the poll that left: %d runs, %v; want none and its context's error", len(p.runs), p.err)
	}
	gathered(t, s, 1)
	close(release)
	wantFor(t, "the first poll", result(t, first), "a", 2)
	wantFor(t, "the poll that stayed", result(t, stays), "c", 3)
	if left := st.left(); left != 20-5 {
		t.Errorf("%d runs left ready, want %d: nothing claimed for the poll that left", left, 20-5)
	}
}

// A claim that fails fails every poll gathered in it, and the next poll claims again.
func TestAFailedGatheredClaimFailsItsPolls(t *testing.T) {
	st, s, first, release := heldClaim(t, 5, 1)
	b := joins(t.Context(), t, s, "b", 1, 1)
	c := joins(t.Context(), t, s, "c", 1, 2)
	broken := errors.New("store unreachable")
	s.cfg.Store = failingStore{st, broken}
	close(release)
	wantFor(t, "the first poll", result(t, first), "a", 1)
	for who, ch := range map[string]<-chan polled{"b": b, "c": c} {
		if p := result(t, ch); !errors.Is(p.err, broken) {
			t.Errorf("%s's poll: %v, want the claim's error", who, p.err)
		}
	}
	s.cfg.Store = st
	wantFor(t, "a poll after", result(t, pollAs(t.Context(), s, "d", 2)), "d", 2)
}

type failingStore struct {
	*queueStore
	err error
}

func (f failingStore) RunClaim(context.Context, store.ClaimParams) ([]store.Run, error) {
	return nil, f.err
}
