package testenv

import (
	"context"
	"sync"
	"time"

	"github.com/ultimat3/jobs/store"
)

// ClaimGate is a store whose claims a test can hold. A wake-up's commit makes its run claimable
// before the engine has folded what it appended into the run's ledger (the fold is what the claim
// hands the worker as its tail); a claim that lands in between carries no tail, and its worker
// reads the history. A test that counts what a wake-up costs holds the claims while it wakes
// runs, so that instant cannot fall inside it.
//
// A timer's wake-up is folded by the timer service's own goroutine between its TimerFire and its
// next TimerNext; AwaitTimerFolds waits for that, for a test whose timers fire on a real clock.
type ClaimGate struct {
	store.Store
	mu       sync.Mutex
	changed  *sync.Cond
	held     bool
	inFlight int
	folding  bool // a TimerFire woke runs and the timer service has not asked TimerNext since
}

// NewClaimGate wraps st; its claims pass until Hold.
func NewClaimGate(st store.Store) *ClaimGate {
	g := &ClaimGate{Store: st}
	g.changed = sync.NewCond(&g.mu)
	return g
}

// RunClaim implements store.Store: it waits while the gate is held.
func (g *ClaimGate) RunClaim(ctx context.Context, p store.ClaimParams) ([]store.Run, error) {
	g.mu.Lock()
	for g.held {
		g.changed.Wait()
	}
	g.inFlight++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.changed.Broadcast()
		g.mu.Unlock()
	}()
	return g.Store.RunClaim(ctx, p)
}

// Hold stops new claims and returns once the claims in flight have returned.
func (g *ClaimGate) Hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = true
	for g.inFlight > 0 {
		g.changed.Wait()
	}
}

// Release lets the held claims go on.
func (g *ClaimGate) Release() {
	g.mu.Lock()
	g.held = false
	g.changed.Broadcast()
	g.mu.Unlock()
}

// TimerFire implements store.Store, noting that the runs it woke are yet to be folded.
func (g *ClaimGate) TimerFire(ctx context.Context, now time.Time, limit int) ([]store.Woken, error) {
	woken, err := g.Store.TimerFire(ctx, now, limit)
	if len(woken) > 0 {
		g.mu.Lock()
		g.folding = true
		g.mu.Unlock()
	}
	return woken, err
}

// TimerNext implements store.Store: the timer service asks it after folding a round's wake-ups.
func (g *ClaimGate) TimerNext(ctx context.Context) (time.Time, bool, error) {
	g.mu.Lock()
	g.folding = false
	g.changed.Broadcast()
	g.mu.Unlock()
	return g.Store.TimerNext(ctx)
}

// AwaitTimerFolds returns once every run a TimerFire woke so far is folded into its ledger.
func (g *ClaimGate) AwaitTimerFolds() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.folding {
		g.changed.Wait()
	}
}
