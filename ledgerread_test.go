package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// A wake-up reads its run's history at most once. A timer's wake-up that the worker keeps parked
// reads nothing: the claim carries what the wake-up appended (Task.Tail) and the engine's ledger
// folded it as it fired. A replayed run reads its history once: the worker's read, which the
// engine folds into the run's ledger, so the record that follows is checked without a read of
// its own (engine.History). Each wake-up used to read the same events twice.
func TestAWakeUpReadsItsHistoryOnce(t *testing.T) {
	for _, b := range testenv.Backends() {
		for _, sticky := range []int{0, -1} {
			t.Run(fmt.Sprintf("%s/sticky=%d", b.Name, sticky), func(t *testing.T) { wakeUpReadsOnce(t, b, sticky) })
		}
	}
}

func wakeUpReadsOnce(t *testing.T, b testenv.Backend, sticky int) {
	counting := testenv.CountHistoryReads(b.Open(t))
	env := testenv.Start(t, testenv.Options{Store: counting})
	{
		j := jobs.MustDefine("nap-then-step", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
			func(c *jobs.Ctx, in int) (int, error) {
				if err := jobs.Sleep(c, "nap", time.Hour); err != nil {
					return 0, err
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
		for deadline := time.Now().Add(10 * time.Second); sticky >= 0 && w.Parked() != runs; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d runs parked, want %d", w.Parked(), runs)
			}
		}
		before := counting.Count()
		env.Advance(time.Hour)
		for _, id := range ids {
			env.Await(id, store.StateCompleted)
		}
		want := int64(0) // parked: resumed from the claim's tail
		if sticky < 0 {
			want = runs // replayed: the worker's read, one each
		}
		if got := counting.Count() - before; got != want {
			t.Errorf("%d history reads for %d wake-ups (sticky %d); want %d", got, runs, sticky, want)
		}
	}
}
