package worker

import (
	"fmt"
	"testing"
	"time"

	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
)

// A worker's per-tenant limits remember a tenant only while it counts: its runs executing, its
// starts inside the rate's window, its backoff while at its cap. Tenants that came and went
// leave nothing behind, so the memory follows the tenants of the last window, not every tenant
// the process ever ran.
func TestTenantLimitsForgetTenantsThatLeft(t *testing.T) {
	c := clock.NewFake(time.Unix(1_700_000_000, 0))
	l := newLimiter(LimitConfig{PerTenant: 1, RatePerTenant: Rate{N: 5, Per: time.Second}}, c)
	for i := range 1000 {
		task := frontend.Task{Tenant: fmt.Sprint("t", i)}
		if ok, _, _ := l.admit(task); !ok {
			t.Fatalf("tenant %d refused", i)
		}
		// A second run of the tenant finds it at its cap: handed back, with a backoff.
		if ok, reason, _ := l.admit(task); ok || reason != HandBackTenant {
			t.Fatalf("tenant %d at its cap: ok=%v reason=%q", i, ok, reason)
		}
		l.done(task)
	}
	c.Advance(2 * time.Second) // every start is now outside the window
	for i := range 3 {
		task := frontend.Task{Tenant: fmt.Sprint("late", i)}
		if ok, _, _ := l.admit(task); !ok {
			t.Fatalf("tenant late%d refused", i)
		}
		l.done(task)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.starts) + len(l.backoff) + len(l.running); n > 10 {
		t.Fatalf("the limiter remembers %d starts, %d backoffs, %d running tenants after 1,000 tenants left; want only the last window's",
			len(l.starts), len(l.backoff), len(l.running))
	}
}
