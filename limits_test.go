package jobs_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

type tenantIn struct {
	Tenant string
	N      int
}

// peakTracker records, per tenant and overall, the most bodies running at once.
type peakTracker struct {
	mu       sync.Mutex
	running  map[string]int
	peak     map[string]int
	all, top int
	starts   map[string][]time.Time
}

func newPeaks() *peakTracker {
	return &peakTracker{running: map[string]int{}, peak: map[string]int{}, starts: map[string][]time.Time{}}
}

func (p *peakTracker) job(name, queue string) *jobs.Job[tenantIn, int] {
	return jobs.MustDefine(name, func(in tenantIn) string { return fmt.Sprintf("%s-%d", in.Tenant, in.N) },
		jobs.TenantFrom(func(in tenantIn) string { return in.Tenant }),
		func(c *jobs.Ctx, in tenantIn) (int, error) {
			return jobs.Step(c, "work", func(context.Context) (int, error) {
				q := "queue:" + c.Run().Queue
				p.mu.Lock()
				p.running[in.Tenant]++
				p.running[q]++
				p.all++
				p.peak[in.Tenant] = max(p.peak[in.Tenant], p.running[in.Tenant])
				p.peak[q] = max(p.peak[q], p.running[q])
				p.top = max(p.top, p.all)
				p.starts[in.Tenant] = append(p.starts[in.Tenant], time.Now())
				p.mu.Unlock()
				time.Sleep(40 * time.Millisecond)
				p.mu.Lock()
				p.running[in.Tenant]--
				p.running[q]--
				p.all--
				p.mu.Unlock()
				return in.N, nil
			})
		}, jobs.Queue(queue))
}

func awaitAllFirstAttempt(t *testing.T, env *testenv.Env, ids []string) {
	t.Helper()
	for _, id := range ids {
		if run := env.Await(id, store.StateCompleted); run.Attempt != 1 {
			t.Fatalf("run %s completed on attempt %d: a claim handed back over a limit spent an attempt", id, run.Attempt)
		}
	}
}

// LimitConfig.PerTenant caps one tenant's runs in the process; another tenant's runs still run,
// and the claims handed back spend no attempt.
func TestLimitPerTenant(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{Clock: clock.Real{}}, func(t *testing.T, env *testenv.Env) {
		p := newPeaks()
		j := p.job("sync-tenant", "sync")
		w := env.Worker(worker.Config{Concurrency: 8, Limits: worker.LimitConfig{PerTenant: 2}}, j)
		var ids []string
		for n := range 5 {
			ids = append(ids, enqueue(t, env, j, tenantIn{"acme", n}))
		}
		ids = append(ids, enqueue(t, env, j, tenantIn{"beta", 0}))
		awaitAllFirstAttempt(t, env, ids)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.peak["acme"] > 2 || p.peak["acme"] < 1 {
			t.Errorf("acme peaked at %d runs at once, cap 2", p.peak["acme"])
		}
		if p.peak["beta"] != 1 {
			t.Errorf("beta ran %d at once, want its one run", p.peak["beta"])
		}
		if w.HandedBack("sync", worker.HandBackTenant) < 1 {
			t.Errorf("no claim was handed back over the tenant cap")
		}
	})
}

// LimitConfig.RatePerTenant lets a tenant start N runs per period in the process.
func TestLimitRatePerTenant(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{Clock: clock.Real{}}, func(t *testing.T, env *testenv.Env) {
		p := newPeaks()
		j := p.job("rate-tenant", "rate")
		const per = 300 * time.Millisecond
		env.Worker(worker.Config{Concurrency: 8, Limits: worker.LimitConfig{RatePerTenant: worker.Rate{N: 2, Per: per}}}, j)
		var ids []string
		for n := range 4 {
			ids = append(ids, enqueue(t, env, j, tenantIn{"acme", n}))
		}
		awaitAllFirstAttempt(t, env, ids)
		p.mu.Lock()
		defer p.mu.Unlock()
		s := p.starts["acme"]
		if len(s) != 4 {
			t.Fatalf("%d starts, want 4", len(s))
		}
		// The third start waited for the window; a small margin for the bodies' own start.
		if gap := s[2].Sub(s[0]); gap < per-50*time.Millisecond {
			t.Errorf("the third run started %s after the first, want about %s or more", gap, per)
		}
	})
}

// LimitConfig.Global caps the process across its queues, and PerQueue each queue, by claiming no
// more than the budget leaves room for: nothing is handed back.
func TestLimitGlobalAndPerQueue(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{Clock: clock.Real{}}, func(t *testing.T, env *testenv.Env) {
		p := newPeaks()
		j1, j2 := p.job("global-1", "g1"), p.job("global-2", "g2")
		w := env.Worker(worker.Config{Concurrency: 6, Limits: worker.LimitConfig{Global: 3, PerQueue: 2}}, j1, j2)
		var ids []string
		for n := range 6 {
			ids = append(ids, enqueue(t, env, j1, tenantIn{fmt.Sprint("t", n), n}))
			ids = append(ids, enqueue(t, env, j2, tenantIn{fmt.Sprint("u", n), n}))
		}
		awaitAllFirstAttempt(t, env, ids)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.top > 3 || p.top < 2 {
			t.Errorf("the process peaked at %d runs at once, global cap 3", p.top)
		}
		for _, q := range []string{"queue:g1", "queue:g2"} {
			if p.peak[q] > 2 {
				t.Errorf("%s peaked at %d runs at once, per-queue cap 2", q, p.peak[q])
			}
		}
		var n float64
		for _, q := range []string{"g1", "g2"} {
			n += w.HandedBack(q, worker.HandBackTenant) + w.HandedBack(q, worker.HandBackRate)
		}
		if n != 0 {
			t.Errorf("%v claims handed back; the global and queue caps claim no more than they can run", n)
		}
	})
}
