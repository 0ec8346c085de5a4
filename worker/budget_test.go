package worker

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
)

// Polls that reserve, lend while they wait, take back and release, all at once: the runs held
// never exceed Global, and every reservation ends free.
func TestBudgetNeverExceedsGlobal(t *testing.T) {
	const global = 3
	b := &budget{free: global, changed: make(chan struct{})}
	var mu sync.Mutex
	held, most := 0, 0
	hold := func(n int) {
		mu.Lock()
		held += n
		most = max(most, held)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for p := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(p), 1))
			for range 2000 {
				want := 1 + r.IntN(global)
				got := b.take(context.Background(), want)
				if got < 1 || got > want {
					t.Errorf("take(%d) = %d", want, got)
					return
				}
				b.lend(got)
				claimed := r.IntN(got + 1)
				runs := b.reclaim(got, claimed)
				if runs > claimed {
					t.Errorf("reclaim(%d, %d) = %d: more than the claimed runs", got, claimed, runs)
					return
				}
				hold(runs)
				hold(-runs)
				b.give(runs)
			}
		}()
	}
	wg.Wait()
	if most > global {
		t.Fatalf("%d runs held at once, Global is %d", most, global)
	}
	if b.free != global || b.lent != 0 {
		t.Fatalf("at rest: %d free, %d lent; want %d free", b.free, b.lent, global)
	}
}

// A poll's reservation lent while it waits is borrowed by another poller at once; the poll, back
// with a run, finds it borrowed and holds none for it (its run is handed back), and the
// borrower's release makes it free again.
func TestBudgetLendsAWaitingPollsReservation(t *testing.T) {
	b := &budget{free: 1, changed: make(chan struct{})}
	if got := b.take(context.Background(), 1); got != 1 {
		t.Fatalf("take = %d", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := b.take(ctx, 1); got != 0 {
		t.Fatalf("take with the budget held = %d, want 0 (it waits)", got)
	}
	b.lend(1)
	if got := b.take(context.Background(), 1); got != 1 {
		t.Fatalf("take of a lent reservation = %d, want 1", got)
	}
	if runs := b.reclaim(1, 1); runs != 0 {
		t.Fatalf("reclaim after the loan was borrowed = %d, want 0", runs)
	}
	b.give(1)
	if b.free != 1 || b.lent != 0 {
		t.Fatalf("%d free, %d lent, want 1 free", b.free, b.lent)
	}
}
