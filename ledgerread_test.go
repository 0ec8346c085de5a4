package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// A wake-up reads its run's history at most once. A wake-up that the worker keeps parked (a
// timer's, an event's) reads nothing: the claim carries what the wake-up appended (Task.Tail)
// and the engine's ledger folded it as it woke the run; only an event too large for the engine
// to keep for the claim is read, once. A replayed run reads its history once: the worker's
// read, which the engine folds into the run's ledger, so the record that follows is checked
// without a read of its own (engine.History). Each wake-up used to read the same events twice.
func TestAWakeUpReadsItsHistoryOnce(t *testing.T) {
	for _, b := range testenv.Backends() {
		for _, c := range []struct {
			wake   string // "timer", "event" or "large" (an event over what a ledger keeps)
			sticky int
			reads  int // per wake-up
		}{
			{"timer", 0, 0}, {"timer", -1, 1},
			{"event", 0, 0}, {"event", -1, 1},
			{"large", 0, 1},
		} {
			t.Run(fmt.Sprintf("%s/%s/sticky=%d", b.Name, c.wake, c.sticky), func(t *testing.T) {
				wakeUpReads(t, b, c.wake, c.sticky, c.reads)
			})
		}
	}
}

func wakeUpReads(t *testing.T, b testenv.Backend, wake string, sticky, reads int) {
	counting := testenv.CountHistoryReads(b.Open(t))
	gate := testenv.NewClaimGate(counting)
	env := testenv.Start(t, testenv.Options{Store: gate})
	j := jobs.MustDefine("nap-then-step", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, in int) (int, error) {
			if wake == "timer" {
				if err := jobs.Sleep(c, "nap", time.Hour); err != nil {
					return 0, err
				}
			} else {
				p, ok, err := jobs.WaitForEvent[map[string]any](c, "go", "go", jobs.Match{"run": fmt.Sprint(in)}, 24*time.Hour)
				if err != nil || !ok || p["body"] == "" {
					return 0, fmt.Errorf("no event: %v", err)
				}
			}
			return jobs.Step(c, "after", func(context.Context) (int, error) { return in + 1, nil })
		})
	w := env.Worker(worker.Config{StickyRuns: sticky}, j)
	const runs = 3
	var ids []string
	for i := range runs {
		ids = append(ids, enqueue(t, env, j, i))
	}
	for _, id := range ids {
		env.Await(id, store.StateSuspended)
	}
	if sticky >= 0 {
		testenv.AwaitParked(t, w, runs)
	}
	before := counting.Count()
	// The wake-ups land while no claim can: each is folded into its run's ledger before a claim
	// sees the run (testenv.ClaimGate).
	gate.Hold()
	defer gate.Release() // should the test end here
	if wake == "timer" {
		env.Advance(time.Hour)
	} else {
		body := "x"
		if wake == "large" {
			body = strings.Repeat("x", 8<<10)
		}
		for i := range runs {
			if _, err := env.Engine.Publish(context.Background(), "go", map[string]any{"run": fmt.Sprint(i), "body": body}); err != nil {
				t.Fatal(err)
			}
		}
	}
	gate.Release()
	for _, id := range ids {
		env.Await(id, store.StateCompleted)
	}
	if got := counting.Count() - before; got != int64(reads*runs) {
		t.Errorf("%d history reads for %d %s wake-ups (sticky %d); want %d", got, runs, wake, sticky, reads*runs)
	}
}
