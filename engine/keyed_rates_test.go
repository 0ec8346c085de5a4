package engine

import (
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// Of a job's declared keyed rates, every one no other of its key covers holds, longest period
// first within a key; the longest keeps the rate log key it always had, and a shorter one's key
// names its period, so no two periods share a log.
func TestKeyedRatesKeepEveryUncoveredPeriod(t *testing.T) {
	rate := func(key string, n int, per time.Duration) jobDecl {
		return jobDecl{cfg: jobs.JobDeclaration{KeyedRate: &jobs.KeyedLimit{Key: key, Limit: n, Per: per}},
			workers: []store.DeclaredBy{{}}}
	}
	f := &fleet{jobs: map[string][]jobDecl{"sync": {
		rate("tenant", 1, time.Minute),
		rate("tenant", 1000, time.Second), // covered by 1 per minute
		rate("tenant", 59, time.Hour),
		rate("tenant", 60, time.Hour), // covered by 59 per hour
		rate("input.n", 5, time.Minute),
		{cfg: jobs.JobDeclaration{KeyedRate: &jobs.KeyedLimit{Key: "tenant", Limit: 1, Per: time.Second}}}, // no worker holds it
	}}}
	var got []string
	for _, k := range f.keyedRates("sync") {
		got = append(got, k.String())
	}
	want := []string{"5 starts per input.n per 1m0s", "59 starts per tenant per 1h0m0s", "1 starts per tenant per 1m0s"}
	if len(got) != len(want) {
		t.Fatalf("keyedRates = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("keyedRates = %q, want %q", got, want)
		}
	}
	k := &jobs.KeyedLimit{Key: jobs.KeyTenant, Limit: 1, Per: time.Minute}
	if got := rateKey("sync", k, "acme", "acme", true); got != `rate:"sync":tenant=acme` {
		t.Errorf("the longest period's key = %q", got)
	}
	if got := rateKey("sync", k, "acme", "acme", false); got != `rate:"sync":1m0s:tenant=acme` {
		t.Errorf("a shorter period's key = %q", got)
	}
}
