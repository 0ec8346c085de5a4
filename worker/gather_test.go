package worker

import (
	"runtime"
	"testing"
)

// A wave: the poller woke for one given-back slot while three more bodies of the same answers
// are runnable but have not run. Gathering yields to them and claims for all four; without it,
// or with no other claim in flight, the poller claims at once for what is free.
func TestGatherTakesTheWave(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // the bodies run only when the poller yields
	const concurrency = 8
	try := func(off bool, inFlight int) int {
		slots, held := make(chan struct{}, concurrency), make(chan struct{}, 2*concurrency)
		for range concurrency {
			slots <- struct{}{}
		}
		for range inFlight {
			held <- struct{}{}
		}
		<-slots // the body that woke the poller gave its slot back
		slots <- struct{}{}
		held <- struct{}{}
		done := make(chan struct{}, 3)
		for range 3 {
			go func() { <-slots; done <- struct{}{} }()
		}
		free := gather(1, concurrency, slots, held, off)
		for range 3 {
			<-done
		}
		return free
	}
	if got := try(false, concurrency); got != 4 {
		t.Errorf("gathering beside claims in flight: claimed for %d slots, want 4", got)
	}
	if got := try(true, concurrency); got != 1 {
		t.Errorf("not gathering: claimed for %d slots, want 1", got)
	}
	// The slots the three bodies gave back are not taken: no other claim was in flight, so the
	// poller does not yield (an idle poller claims at once).
	if got := try(false, 0); got != 1 {
		t.Errorf("idle poller: claimed for %d slots, want 1", got)
	}
}
