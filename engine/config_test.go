package engine_test

import (
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// A lease the stores would refuse on every claim (negative, or longer than store.MaxLease) is
// refused when the engine is built, with the reason, rather than on every poll.
func TestNewRefusesALeaseNoClaimCouldTake(t *testing.T) {
	for _, lease := range []time.Duration{-time.Second, store.MaxLease + time.Hour} {
		if _, err := engine.New(engine.Config{Store: memory.New(), Lease: lease}); !jobs.HasCode(err, jobs.CodeBadRequest) {
			t.Errorf("lease %s: %v, want %s", lease, err, jobs.CodeBadRequest)
		}
	}
	if _, err := engine.New(engine.Config{Store: memory.New(), Lease: store.MaxLease}); err != nil {
		t.Errorf("lease %s (the longest): %v", store.MaxLease, err)
	}
}
