package engine_test

import (
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// A lease the stores would refuse on every claim (negative, or longer than store.MaxLease), or one
// below the protocol's floor (its workers would read it as the floor), is
// refused when the engine is built, with the reason, rather than on every poll.
func TestNewRefusesALeaseNoClaimCouldTake(t *testing.T) {
	for _, lease := range []time.Duration{-time.Second, time.Nanosecond, frontend.MinLease - 1, store.MaxLease + time.Hour} {
		if _, err := engine.New(engine.Config{Store: memory.New(), Lease: lease}); !jobs.HasCode(err, jobs.CodeBadRequest) {
			t.Errorf("lease %s: %v, want %s", lease, err, jobs.CodeBadRequest)
		}
	}
	if _, err := engine.New(engine.Config{Store: memory.New(), Lease: store.MaxLease}); err != nil {
		t.Errorf("lease %s (the longest): %v", store.MaxLease, err)
	}
}

// A manifest interval below the protocol's floor is refused when the engine is built: its
// workers read it as the floor, so the engine would count them gone (three intervals without a
// manifest) while they keep the pace the floor names.
func TestNewRefusesAManifestIntervalBelowTheFloor(t *testing.T) {
	for _, every := range []time.Duration{-time.Second, time.Nanosecond, frontend.MinResend - 1} {
		if _, err := engine.New(engine.Config{Store: memory.New(), ManifestResend: every}); !jobs.HasCode(err, jobs.CodeBadRequest) {
			t.Errorf("manifest resend %s: %v, want %s", every, err, jobs.CodeBadRequest)
		}
	}
	for _, every := range []time.Duration{0, frontend.MinResend} {
		if _, err := engine.New(engine.Config{Store: memory.New(), ManifestResend: every}); err != nil {
			t.Errorf("manifest resend %s: %v", every, err)
		}
	}
}
