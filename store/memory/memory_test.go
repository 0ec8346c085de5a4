package memory_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/store/storetest"
)

// The suite starts goroutines (concurrent creates, claims, publishes, timer firings); every one
// of them must be joined by the time the tests end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := memory.New()
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	})
}

// After Close every call is refused, so a component that outlives its store fails loudly.
func TestClosed(t *testing.T) {
	s := memory.New()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.RunGet(t.Context(), "x"); jobs.CodeOf(err) != jobs.CodeStoreUnavailable {
		t.Errorf("RunGet after Close: %v, want %s", err, jobs.CodeStoreUnavailable)
	}
}
