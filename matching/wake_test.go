package matching

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs/store"
)

// queueStore is a store whose only method is RunClaim over an in-memory list of ready runs; it
// counts claims. after, when set, is called once a claim has read the list, before it returns.
type queueStore struct {
	store.Store
	mu     sync.Mutex
	ready  []store.Run
	next   int
	claims atomic.Int64
	// claimers counts the workers claimed for, a claim's shares each.
	claimers atomic.Int64
	after    func()
}

func (q *queueStore) add(queue string, n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for range n {
		q.next++
		q.ready = append(q.ready, store.Run{ID: fmt.Sprint("r", q.next), Queue: queue})
	}
}

func (q *queueStore) RunClaim(_ context.Context, p store.ClaimParams) ([]store.Run, error) {
	q.claims.Add(1)
	q.claimers.Add(int64(len(p.Claimers())))
	q.mu.Lock()
	var out, left []store.Run
	for _, r := range q.ready {
		if len(out) < p.Total() && (len(p.Queues) == 0 || r.Queue == p.Queues[0]) {
			out = append(out, r)
		} else {
			left = append(left, r)
		}
	}
	// Every run is free: the shares take them in order.
	to := p.ShareOut(make([]string, len(out)))
	for i := range out {
		out[i].WorkerID = to[i]
	}
	q.ready = left
	after := q.after
	q.after = nil
	q.mu.Unlock()
	if after != nil {
		after()
	}
	return out, nil
}

func newTestService() (*queueStore, *Service) {
	st := &queueStore{}
	// A fallback of an hour: a wake that is lost shows as a test that times out, not as a run
	// found a second later.
	return st, New(Config{Store: st, Fallback: time.Hour})
}

// polls starts n long-polls of queue q (Max max each) and returns their results' channel.
func polls(ctx context.Context, s *Service, n, max int) <-chan []store.Run {
	out := make(chan []store.Run, n)
	for i := range n {
		go func() {
			runs, err := s.Poll(ctx, PollParams{WorkerID: fmt.Sprint("w", i), Queues: []string{"q"}, Max: max, Wait: time.Hour})
			if err == nil {
				out <- runs
			}
		}()
	}
	return out
}

// waitIdle waits until n polls of queue q are waiting.
func waitIdle(t *testing.T, s *Service, n int) {
	t.Helper()
	eventually(t, "polls waiting", func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.idle["q"])
	}, n)
}

// eventually waits up to 10s for count to return want.
func eventually(t *testing.T, what string, count func() int, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := count()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d, want %d", what, got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

func recv(t *testing.T, ch <-chan []store.Run) []store.Run {
	t.Helper()
	select {
	case runs := <-ch:
		return runs
	case <-time.After(10 * time.Second):
		t.Fatal("no poll returned within 10s: a wake was lost")
		return nil
	}
}

// A new run wakes one waiting poll, not all of them.
func TestANewRunWakesOnePoll(t *testing.T) {
	st, s := newTestService()
	ch := polls(t.Context(), s, 8, 4)
	waitIdle(t, s, 8)
	before := st.claims.Load() // each poll's first claim, empty
	for i := range 5 {
		st.add("q", 1)
		s.WakeQueue("q", 1)
		if runs := recv(t, ch); len(runs) != 1 {
			t.Fatalf("wake %d: a poll returned %d runs, want 1", i, len(runs))
		}
		waitIdle(t, s, 7-i)
	}
	// Polls woken for nothing would claim again: give them the time to.
	time.Sleep(100 * time.Millisecond)
	if got := st.claims.Load() - before; got != 5 {
		t.Fatalf("%d claims for 5 new runs with 8 polls waiting, want 5 (one a run)", got)
	}
	// Wake still wakes every poll (a suspended run's holder must hear it): each claims, alone or
	// in a claim shared with the others (gather.go).
	before = st.claimers.Load()
	s.Wake()
	deadline := time.Now().Add(10 * time.Second)
	for st.claimers.Load()-before < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("Wake: %d polls claimed, want the 3 waiting polls", st.claimers.Load()-before)
		}
		time.Sleep(time.Millisecond)
	}
}

// A wake that comes while a poll's claim is in flight (the claim read the queue before the run
// existed) makes the poll claim again rather than wait.
func TestAWakeDuringAClaimIsNotLost(t *testing.T) {
	st, s := newTestService()
	st.after = func() { // the first claim has read an empty queue: the run is committed now
		st.add("q", 1)
		s.WakeQueue("q", 1)
	}
	ctx := t.Context()
	ch := polls(ctx, s, 1, 4)
	if runs := recv(t, ch); len(runs) != 1 {
		t.Fatalf("the poll returned %d runs, want 1", len(runs))
	}
	if got := st.claims.Load(); got != 2 {
		t.Fatalf("%d claims, want 2 (the one that missed the run, the one that took it)", got)
	}
}

// A claim that comes back full passes a wake on: one wake for three runs still reaches three
// polls of one run each.
func TestAFullClaimPassesTheWakeOn(t *testing.T) {
	st, s := newTestService()
	ch := polls(t.Context(), s, 3, 1)
	waitIdle(t, s, 3)
	st.add("q", 3)
	s.WakeQueue("q", 1) // as a notification says it: the queue, not the count
	for i := range 3 {
		if runs := recv(t, ch); len(runs) != 1 {
			t.Fatalf("poll %d returned %d runs, want 1", i, len(runs))
		}
	}
}

// Wakes that no waiting poll could take are owed: a poll that comes to wait claims instead. And
// an empty claim clears them, so wakes whose runs someone else claimed do not send a poll to the
// store again and again.
func TestOwedWakesAreClaimedOnceAndClearedByAnEmptyClaim(t *testing.T) {
	st, s := newTestService()
	ctx := t.Context()
	s.WakeQueue("q", 1000) // no poll waiting; the runs went to another engine's workers
	ch := polls(ctx, s, 1, 4)
	waitIdle(t, s, 1)
	if got := st.claims.Load(); got != 1 {
		t.Fatalf("%d claims before the poll waited, want 1", got)
	}
	st.add("q", 1)
	s.WakeQueue("q", 1)
	if runs := recv(t, ch); len(runs) != 1 {
		t.Fatalf("the poll returned %d runs, want 1", len(runs))
	}
}

// A poll that stops waiting after it was handed a wake gives the wake back to the queue, where
// another poll takes it.
func TestAPollThatLeavesGivesItsWakeBack(t *testing.T) {
	_, s := newTestService()
	a := &waiter{queues: []string{"q"}, handed: make([]int, 1), ch: make(chan struct{}, 1)}
	if !s.wait(a, 4) {
		t.Fatal("nothing is owed; the poll should wait")
	}
	s.WakeQueue("q", 2)
	if a.handed[0] != 2 {
		t.Fatalf("the waiting poll was handed %d wakes, want 2", a.handed[0])
	}
	s.leave(a, true) // its deadline came before it claimed
	if got := s.owed["q"].n; got != 2 {
		t.Fatalf("%d wakes owed to the queue after the poll left, want 2", got)
	}
	b := &waiter{queues: []string{"q"}, handed: make([]int, 1), ch: make(chan struct{}, 1)}
	if s.wait(b, 4) {
		t.Fatal("a poll came to wait while wakes are owed: it should claim instead")
	}
}

// Churn: many polls, runs made ready in bursts woken in every way the engine wakes (a wake a
// run, one wake for a burst as a notification says it, a wake to every poll), polls leaving and
// coming back between bursts. After each burst every run is claimed, once, without the fallback
// (an hour). A poll that returns runs claims again at once, which hides a single lost wake here;
// the tests above prove each rule on its own, this one that together they neither stall nor
// hand a run out twice.
func TestEveryBurstIsClaimedWithoutTheFallback(t *testing.T) {
	st, s := newTestService()
	rng := rand.New(rand.NewPCG(1, 2))
	var claimed sync.Map
	got := make(chan int, 1024)
	type poller struct{ stop context.CancelFunc }
	start := func(i int) poller {
		ctx, stop := context.WithCancel(t.Context())
		max := 1 + i%4
		go func() {
			for ctx.Err() == nil {
				runs, err := s.Poll(ctx, PollParams{WorkerID: fmt.Sprint("w", i), Queues: []string{"q"}, Max: max, Wait: time.Hour})
				if err != nil {
					return
				}
				for _, r := range runs {
					if _, dup := claimed.LoadOrStore(r.ID, true); dup {
						t.Errorf("run %s claimed twice", r.ID)
					}
				}
				got <- len(runs)
			}
		}()
		return poller{stop}
	}
	const polls = 12
	ps := make([]poller, polls)
	for i := range ps {
		ps[i] = start(i)
	}
	for round := range 300 {
		// Some polls leave and others come (a poll that leaves may hold wakes it gives back).
		for range rng.IntN(3) {
			i := rng.IntN(polls)
			ps[i].stop()
			ps[i] = start(i)
		}
		n := 1 + rng.IntN(12)
		st.add("q", n)
		switch rng.IntN(3) {
		case 0:
			for range n {
				s.WakeQueue("q", 1)
			}
		case 1:
			s.WakeQueue("q", 1)
		case 2:
			s.Wake()
		}
		for left := n; left > 0; {
			select {
			case k := <-got:
				left -= k
			case <-time.After(10 * time.Second):
				st.mu.Lock()
				ready := len(st.ready)
				st.mu.Unlock()
				t.Fatalf("round %d: %d runs still ready after 10s: a wake was lost", round, ready)
			}
		}
	}
}
