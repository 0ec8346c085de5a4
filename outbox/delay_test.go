package outbox

import (
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/internal/testenv"
)

// A staged enqueue's delay counts from staging, as a direct enqueue's counts from the enqueue:
// a row the relay publishes 50 minutes late (the relay was down, or the backlog long) runs at
// staging + delay, not publish + delay; one published past its delay is ready at once.
func TestStagedDelayCountsFromStaging(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, env *testenv.Env) {
		fake := env.Clock.(*clock.Fake)
		ob := newOutbox(t, b, env, Required)
		stagedAt := fake.Now()
		tx, commit, _ := b.begin(t)
		for _, key := range []string{"later", "overdue", "none"} {
			delay := map[string]time.Duration{"later": time.Hour, "overdue": 30 * time.Minute}[key]
			if _, err := ob.Tx(tx).EnqueueTx(t.Context(), jobs.EnqueueRequest{Job: "note", Key: key, NoTenant: true, Delay: delay}); err != nil {
				t.Fatal(err)
			}
		}
		if err := commit(); err != nil {
			t.Fatal(err)
		}
		fake.Advance(50 * time.Minute)
		publishedAt := fake.Now()
		if n := pass(t, newRelay(t, b, env, env.Engine, "r1", 0)); n != 3 {
			t.Fatalf("published %d rows, want 3", n)
		}
		runs := runsOf(t, env)
		for key, want := range map[string]time.Time{
			"later":   stagedAt.Add(time.Hour),
			"overdue": publishedAt,
			"none":    publishedAt,
		} {
			if len(runs[key]) != 1 {
				t.Fatalf("runs of %s: %v", key, runs[key])
			}
			if got := runs[key][0].ReadyAt; !got.Equal(want) {
				t.Errorf("run %s is ready at %s (staged + %s), want %s (staged + %s)", key, got, got.Sub(stagedAt), want, want.Sub(stagedAt))
			}
		}
		if s := runs["overdue"][0].State; s != "ready" {
			t.Errorf("the overdue run is %s, want ready", s)
		}
	})
}
