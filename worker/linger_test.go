package worker

import (
	"testing"
	"time"

	"github.com/ultimat3/jobs/frontend"
)

// The default batch is a quarter of the queue's slots, and a queue of fewer than 32 slots does
// not linger unless ClaimBatch asks for it.
func TestLingerFor(t *testing.T) {
	cases := []struct {
		linger      time.Duration
		batch       int
		concurrency int
		wait        time.Duration
		k           int
	}{
		{concurrency: 32, wait: defaultClaimLinger, k: 8},
		{concurrency: 100, wait: defaultClaimLinger, k: 25},
		{concurrency: 16},
		{batch: 4, concurrency: 16, wait: defaultClaimLinger, k: 4},
		{batch: 40, concurrency: 16, wait: defaultClaimLinger, k: 16},
		{batch: 1, concurrency: 32},
		{linger: -1, concurrency: 32},
		{linger: 5 * time.Millisecond, concurrency: 32, wait: 5 * time.Millisecond, k: 8},
	}
	for _, c := range cases {
		w := &Worker{cfg: Config{ClaimLinger: c.linger, ClaimBatch: c.batch}}
		if d, k := w.lingerFor(c.concurrency); d != c.wait || k != c.k {
			t.Errorf("linger %s, batch %d, concurrency %d: got %s for %d, want %s for %d",
				c.linger, c.batch, c.concurrency, d, k, c.wait, c.k)
		}
	}
}

// cheapFrontend says whether its claims are cheap, and nothing else (lingerFor asks no more).
type cheapFrontend struct {
	frontend.Frontend
	cheap bool
}

func (f cheapFrontend) CheapClaims() bool { return f.cheap }

// On a frontend whose claims cost no flush a poller does not linger by default; one set
// explicitly still does, and a frontend that says its claims are not cheap keeps the default.
func TestLingerForCheapClaims(t *testing.T) {
	cases := []struct {
		cheap  bool
		linger time.Duration
		wait   time.Duration
		k      int
	}{
		{cheap: true},
		{cheap: true, linger: 5 * time.Millisecond, wait: 5 * time.Millisecond, k: 8},
		{cheap: false, wait: defaultClaimLinger, k: 8},
	}
	for _, c := range cases {
		w := &Worker{cfg: Config{Frontend: cheapFrontend{cheap: c.cheap}, ClaimLinger: c.linger}}
		if d, k := w.lingerFor(32); d != c.wait || k != c.k {
			t.Errorf("cheap %v, linger %s: got %s for %d, want %s for %d", c.cheap, c.linger, d, k, c.wait, c.k)
		}
	}
}
