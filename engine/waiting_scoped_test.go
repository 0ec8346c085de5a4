package engine

import (
	"strings"
	"testing"

	"github.com/ultimat3/jobs/store"
)

// Every hand-back's note, worded for a caller scoped to the run's tenant, keeps its reason and
// names the run's job (and queue) only: never the worker, the limit's size, or a keyed limit's
// key and value its detail names.
func TestScopedHandBackNamesNoDetail(t *testing.T) {
	r := store.Run{Job: "bill", Queue: "payments", State: store.StateDelayed}
	cases := []struct {
		note, want string
		secrets    []string
	}{
		{handBackJobCap + ": " + jobCapNote("bill", 7), `job_cap: job "bill" was at its fleet concurrency cap`, []string{"7 running"}},
		{handBackKeyCap + `: job "bill" is at its keyed concurrency cap for input.region = "eu" (2, jobs.ConcurrencyBy)`,
			`key_cap: a keyed limit of job "bill" held the run back`, []string{"region", `"eu"`}},
		{handBackKeyRate + `: rate limited by input.region = "eu" until 09:00 (1 per 1h, jobs.RateBy)`,
			`key_rate: a keyed limit of job "bill" held the run back`, []string{"region", `"eu"`}},
		{`tenant_cap: tenant "acme" is at worker w-1's LimitConfig.PerTenant (3 at once)`, `tenant_cap: a worker's own limits`, []string{"w-1", "3 at once"}},
		{`tenant_rate: tenant "acme" is at worker w-1's LimitConfig.RatePerTenant (5 per 1m0s)`, `tenant_rate: a worker's own limits`, []string{"w-1", "5 per"}},
		{`global_cap: worker w-1 is at its LimitConfig.Global (4 at once)`, `global_cap: a worker's own limits`, []string{"w-1", "4 at once"}},
		{handBackUndeclared + `: worker "w-1" does not host job "bill" on queue "payments"`,
			`undeclared: the worker that claimed it does not host job "bill" on queue "payments"`, []string{"w-1"}},
		{handBackOther + ": the worker's own words, w-1", `other: a worker handed the run back`, []string{"w-1"}},
		{"no reason at all", `other: a worker handed the run back`, []string{"at all"}},
	}
	for _, c := range cases {
		got := scopedHandBack(c.note, r)
		if !strings.HasPrefix(got, c.want) || !strings.HasSuffix(got, "; it is tried again shortly") {
			t.Errorf("scopedHandBack(%q) = %q, want it to begin %q", c.note, got, c.want)
		}
		for _, s := range c.secrets {
			if strings.Contains(got, s) {
				t.Errorf("scopedHandBack(%q) = %q names %q", c.note, got, s)
			}
		}
	}
}
