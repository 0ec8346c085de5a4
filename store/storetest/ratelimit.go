package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs/store"
)

// rateTake counts a start of key by holder at at(d), at most limit per per.
func rateTake(t *testing.T, s store.Store, key, holder string, limit int, per, d time.Duration) (bool, time.Time) {
	t.Helper()
	ok, retry, err := s.RateTake(context.Background(), store.RateParams{Key: key, Holder: holder, Limit: limit, Per: per, Now: at(d)})
	if err != nil {
		t.Fatalf("RateTake %s at +%s: %v", key, d, err)
	}
	return ok, retry
}

var rateTests = []test{
	{"CountsUpToTheLimitThenNamesWhenRoomComesBack", func(t *testing.T, s store.Store) {
		for i, d := range []time.Duration{0, 10 * time.Second, 20 * time.Second} {
			if ok, _ := rateTake(t, s, "k", fmt.Sprint("r", i), 3, time.Minute, d); !ok {
				t.Fatalf("start %d at +%s refused, want counted (3 per minute)", i, d)
			}
		}
		ok, retry := rateTake(t, s, "k", "r3", 3, time.Minute, 30*time.Second)
		if ok || !retry.Equal(at(time.Minute)) {
			t.Fatalf("fourth start within the minute: ok=%v retry %v, want refused until %v", ok, retry, at(time.Minute))
		}
		// The refused take counted nothing: when the first start lapses, exactly one more fits.
		if ok, _ := rateTake(t, s, "k", "r4", 3, time.Minute, time.Minute); !ok {
			t.Fatal("start once the oldest lapsed: refused, want counted")
		}
		ok, retry = rateTake(t, s, "k", "r5", 3, time.Minute, time.Minute)
		if ok || !retry.Equal(at(70*time.Second)) {
			t.Fatalf("next start: ok=%v retry %v, want refused until %v", ok, retry, at(70*time.Second))
		}
	}},

	{"AHolderIsCountedOnce", func(t *testing.T, s store.Store) {
		// A run claimed again before it recorded anything takes its start again: the same start.
		if ok, _ := rateTake(t, s, "k", "r1", 1, time.Hour, 0); !ok {
			t.Fatal("first start refused")
		}
		if ok, _ := rateTake(t, s, "k", "r1", 1, time.Hour, time.Minute); !ok {
			t.Fatal("the same holder again within its period: refused, want ok (counted once)")
		}
		ok, retry := rateTake(t, s, "k", "r2", 1, time.Hour, 2*time.Minute)
		if ok || !retry.Equal(at(time.Hour)) {
			t.Fatalf("another holder: ok=%v retry %v, want refused until %v (the first start counted once)", ok, retry, at(time.Hour))
		}
		// Once the holder's period passed, it is a new start.
		if ok, _ := rateTake(t, s, "k", "r1", 1, time.Hour, time.Hour); !ok {
			t.Fatal("the holder after its period: refused, want counted")
		}
		if ok, _ := rateTake(t, s, "k", "r2", 1, time.Hour, time.Hour+time.Second); ok {
			t.Fatal("another holder within the holder's new period: counted, want refused")
		}
	}},

	{"KeysCountApart", func(t *testing.T, s store.Store) {
		if ok, _ := rateTake(t, s, "a", "r1", 1, time.Hour, 0); !ok {
			t.Fatal("a: refused")
		}
		if ok, _ := rateTake(t, s, "b", "r2", 1, time.Hour, 0); !ok {
			t.Fatal("b: refused while only a is at its limit")
		}
		if ok, _ := rateTake(t, s, "a", "r3", 1, time.Hour, time.Second); ok {
			t.Fatal("a's second start within the hour: counted, want refused")
		}
	}},

	{"ALoweredLimitWaitsForEnoughToLapse", func(t *testing.T, s store.Store) {
		for i := range 3 {
			rateTake(t, s, "k", fmt.Sprint("r", i), 3, time.Minute, time.Duration(i)*time.Second)
		}
		// Three counted, the limit now 1: room comes back only when all three lapsed.
		ok, retry := rateTake(t, s, "k", "r9", 1, time.Minute, 5*time.Second)
		if ok || !retry.Equal(at(time.Minute+2*time.Second)) {
			t.Fatalf("ok=%v retry %v, want refused until %v", ok, retry, at(time.Minute+2*time.Second))
		}
	}},

	{"ConcurrentTakersNeverCountOverTheLimit", func(t *testing.T, s store.Store) {
		var wg sync.WaitGroup
		var counted atomic.Int32
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, _, err := s.RateTake(context.Background(), store.RateParams{Key: "k", Holder: fmt.Sprint("r", i), Limit: 4, Per: time.Minute, Now: at(0)})
				if err != nil {
					t.Error(err)
				}
				if ok {
					counted.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := counted.Load(); n != 4 {
			t.Errorf("%d of 12 concurrent starts counted, want 4", n)
		}
	}},

	{"PruneDeletesLapsedCounts", func(t *testing.T, s store.Store) {
		rateTake(t, s, "a", "r1", 5, time.Minute, 0)
		rateTake(t, s, "b", "r2", 5, time.Minute, 0)
		rateTake(t, s, "b", "r3", 5, time.Hour, 0)
		n, err := s.RatePrune(context.Background(), at(time.Minute))
		if err != nil || n != 2 {
			t.Fatalf("RatePrune: %d, %v; want the 2 starts whose minute passed", n, err)
		}
		// The hour-long count is kept: b at limit 1 is still refused.
		if ok, _ := rateTake(t, s, "b", "r4", 1, time.Hour, time.Minute); ok {
			t.Error("b after the prune: counted, want refused by the start still within its hour")
		}
	}},
}
