package jobs_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// readCounting counts the store's history reads.
type readCounting struct {
	store.Store
	reads atomic.Int64
}

func (s *readCounting) HistoryRead(ctx context.Context, id string, after int64, limit int) ([]history.Event, error) {
	s.reads.Add(1)
	return s.Store.HistoryRead(ctx, id, after, limit)
}

// A wake-up reads its run's history once: the worker reads what the wake-up appended to resume a
// parked body (or the whole history to replay one it does not keep), and the engine folds that
// read into the run's ledger, so the record that follows is checked without a read of its own
// (engine.History). Each wake-up used to read the same events twice.
func TestAWakeUpReadsItsHistoryOnce(t *testing.T) {
	for _, b := range testenv.Backends() {
		for _, sticky := range []int{0, -1} {
			t.Run(fmt.Sprintf("%s/sticky=%d", b.Name, sticky), func(t *testing.T) { wakeUpReadsOnce(t, b, sticky) })
		}
	}
}

func wakeUpReadsOnce(t *testing.T, b testenv.Backend, sticky int) {
	counting := &readCounting{Store: b.Open(t)}
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
		before := counting.reads.Load()
		env.Advance(time.Hour)
		for _, id := range ids {
			env.Await(id, store.StateCompleted)
		}
		if got := counting.reads.Load() - before; got != runs {
			t.Errorf("%d history reads for %d wake-ups; want one each", got, runs)
		}
	}
}
