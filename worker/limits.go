package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
)

// LimitConfig is this process's budget of runs. Every field is per worker process, not for the
// fleet: PerTenant 2 on twenty replicas is forty runs of a tenant at once, and RatePerTenant's
// window lives in this process's memory, so a restart grants every tenant a fresh allowance.
// Size it as a per-replica budget; for a limit the fleet must hold, declare it on the job
// (jobs.Concurrency), which the engine enforces with rows every replica sees. Zero fields do not
// limit.
type LimitConfig struct {
	// PerTenant caps the runs of one tenant executing at once in this process. Runs of no tenant
	// are not counted.
	PerTenant int
	// PerQueue caps the runs of one queue executing at once (it lowers Config.Queues'
	// concurrency of every queue above it).
	PerQueue int
	// Global caps the runs executing at once in this process, across its queues.
	Global int
	// RatePerTenant caps how many runs of one tenant this process starts per period.
	RatePerTenant Rate
}

// Rate is N per Per.
type Rate struct {
	N   int
	Per time.Duration
}

// Why a claim was handed back (the reason label of jobs_claims_handed_back_total).
const (
	HandBackTenant = "tenant_cap"
	HandBackRate   = "tenant_rate"
	HandBackGlobal = "global_cap"
)

// A claim over PerTenant or RatePerTenant is handed back (frontend.CmdRelease: no attempt
// spent), delayed so that it is not claimed again at once: for the rate, until the window has
// room; for the tenant cap, by a backoff per tenant that doubles while the tenant stays at its
// cap (tenantBackoffMin to tenantBackoffMax) and resets once a run of it is admitted. PerQueue is
// never over: the pollers do not ask for more runs than they leave room for. Nor, mostly, is
// Global: a poller reserves its share before it asks. But a poll that waits for work lends its
// reservation to the pollers of other queues (budget.lend), so an idle queue's long-poll does
// not hold the process's budget while another queue has runs ready; a run its poll then claims
// without a share left is handed back ready at once (HandBackGlobal), to be claimed by the next
// poll that holds one.
const (
	tenantBackoffMin = 250 * time.Millisecond
	tenantBackoffMax = 5 * time.Second
)

type limiter struct {
	cfg   LimitConfig
	clock clock.Clock
	// global is the budget of runs executing, when Global is set.
	global *budget

	mu      sync.Mutex
	running map[string]int
	starts  map[string][]time.Time
	backoff map[string]time.Duration
	// sweepAt is when starts is next swept of the tenants whose every start left the rate's
	// window (forget).
	sweepAt time.Time
}

func newLimiter(cfg LimitConfig, c clock.Clock) *limiter {
	l := &limiter{cfg: cfg, clock: c, running: map[string]int{}, starts: map[string][]time.Time{},
		backoff: map[string]time.Duration{}}
	if cfg.Global > 0 {
		l.global = &budget{free: cfg.Global, changed: make(chan struct{})}
	}
	return l
}

// take reserves up to want runs of the global budget, waiting for at least one; 0 when ctx ends
// first. Without a global cap it grants want.
func (l *limiter) take(ctx context.Context, want int) int {
	if l.global == nil {
		return want
	}
	return l.global.take(ctx, want)
}

// give returns n reservations of the global budget.
func (l *limiter) give(n int) {
	if l.global != nil && n > 0 {
		l.global.give(n)
	}
}

// lend makes n reservations of a poll about to wait borrowable by other pollers (see budget);
// the poll answers with back once it returns, which says how many it holds again.
func (l *limiter) lend(n int) (back func(claimed int) int) {
	if l.global == nil || n == 0 {
		return func(int) int { return n }
	}
	l.global.lend(n)
	return func(claimed int) int { return l.global.reclaim(n, claimed) }
}

// budget is LimitConfig.Global's count of runs: free reservations, and those lent by polls that
// wait for work. A poller takes free ones first, else borrows lent ones; a poll back from its
// wait takes back what is still lent (up to what it lent), and more from the free ones if it
// claimed more runs than that. Every reservation is free, lent or held, so the runs executing
// never exceed Global.
type budget struct {
	mu   sync.Mutex
	free int
	lent int
	// changed is closed, and replaced, when free or lent grows: the pollers waiting to take
	// look again.
	changed chan struct{}
}

func (b *budget) take(ctx context.Context, want int) int {
	for {
		b.mu.Lock()
		if b.free > 0 || b.lent > 0 {
			n := min(want, b.free)
			b.free -= n
			m := min(want-n, b.lent)
			b.lent -= m
			b.mu.Unlock()
			return n + m
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0
		}
	}
}

func (b *budget) give(n int) {
	b.mu.Lock()
	b.free += n
	b.grew()
	b.mu.Unlock()
}

func (b *budget) lend(n int) {
	b.mu.Lock()
	b.lent += n
	b.grew()
	b.mu.Unlock()
}

// reclaim ends a loan of lent reservations by a poll that claimed runs: it returns how many the
// poll holds now, at most claimed (the rest of what is still lent becomes free).
func (b *budget) reclaim(lent, claimed int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	back := min(lent, b.lent)
	b.lent -= back
	held := min(back, claimed)
	if back > held {
		b.free += back - held
		b.grew()
	}
	if more := min(claimed-held, b.free); more > 0 {
		b.free -= more
		held += more
	}
	return held
}

// grew wakes the pollers waiting to take; b.mu is held.
func (b *budget) grew() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// admit decides whether a claimed task may run here now. When it may not, it says why and when
// to offer the run again.
func (l *limiter) admit(t frontend.Task) (ok bool, reason string, readyAt time.Time) {
	if t.Tenant == "" || (l.cfg.PerTenant <= 0 && l.cfg.RatePerTenant.N <= 0) {
		return true, "", time.Time{}
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cfg.PerTenant > 0 && l.running[t.Tenant] >= l.cfg.PerTenant {
		d := max(l.backoff[t.Tenant], tenantBackoffMin)
		l.backoff[t.Tenant] = min(2*d, tenantBackoffMax)
		return false, HandBackTenant, now.Add(d)
	}
	if r := l.cfg.RatePerTenant; r.N > 0 && r.Per > 0 {
		s := l.starts[t.Tenant]
		for len(s) > 0 && !s[0].After(now.Add(-r.Per)) {
			s = s[1:]
		}
		if len(s) >= r.N {
			l.starts[t.Tenant] = s
			return false, HandBackRate, s[0].Add(r.Per)
		}
		l.starts[t.Tenant] = append(s, now)
		l.forget(now, r.Per)
	}
	l.running[t.Tenant]++
	delete(l.backoff, t.Tenant)
	return true, "", time.Time{}
}

// forget drops, once a period, the tenants whose every start left the rate's window: a start is
// pruned only when its own tenant is admitted again, so a tenant seen once used to keep its entry
// for the process's life, one per tenant ever run (TestTenantLimitsForgetTenantsThatLeft). The
// sweep walks the tenants started within about two periods, once a period. l.mu is held.
func (l *limiter) forget(now time.Time, per time.Duration) {
	if now.Before(l.sweepAt) {
		return
	}
	l.sweepAt = now.Add(per)
	for tenant, s := range l.starts {
		if len(s) == 0 || !s[len(s)-1].After(now.Add(-per)) {
			delete(l.starts, tenant)
		}
	}
}

// done ends an admitted run's hold on its tenant's budget.
func (l *limiter) done(t frontend.Task) {
	if t.Tenant == "" || (l.cfg.PerTenant <= 0 && l.cfg.RatePerTenant.N <= 0) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running[t.Tenant]--; l.running[t.Tenant] <= 0 {
		delete(l.running, t.Tenant)
		// No longer at its cap, and the cap's backoff doubles only while it stays there. Kept,
		// it was an entry per tenant that ever reached its cap, for the process's life.
		delete(l.backoff, t.Tenant)
	}
	if len(l.starts[t.Tenant]) == 0 {
		delete(l.starts, t.Tenant)
	}
}

// HandedBack returns how many claims of a queue this worker handed back over its LimitConfig for
// reason (HandBackTenant, HandBackRate): for tests and health checks.
func (w *Worker) HandedBack(queue, reason string) float64 {
	c, err := w.metrics.handedBack.GetMetricWithLabelValues(queue, reason)
	if err != nil {
		return 0
	}
	return readCounter(c)
}

// explain says, for `jobs show`, which of this process's limits handed a claim back.
func (l *limiter) explain(reason string, t frontend.Task, workerID string) string {
	switch reason {
	case HandBackTenant:
		return fmt.Sprintf("tenant %q is at worker %s's LimitConfig.PerTenant (%d at once)", t.Tenant, workerID, l.cfg.PerTenant)
	case HandBackRate:
		return fmt.Sprintf("tenant %q is at worker %s's LimitConfig.RatePerTenant (%d per %s)", t.Tenant, workerID,
			l.cfg.RatePerTenant.N, l.cfg.RatePerTenant.Per)
	case HandBackGlobal:
		return fmt.Sprintf("worker %s is at its LimitConfig.Global (%d at once): the run is ready for the next claim", workerID, l.cfg.Global)
	}
	return reason
}
