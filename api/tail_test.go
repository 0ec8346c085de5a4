package api_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// A remote worker resumes a run it keeps parked from what its wake-up appended, carried in the
// poll's answer (Task.Tail): the timer's wake-up costs no history read, here or in the engine.
func TestRemoteWakeUpResumesFromTheClaimsTail(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			st := testenv.CountHistoryReads(b.Open(t))
			gate := testenv.NewClaimGate(st)
			addr := freeAddr(t)
			e := startEngine(t, gate, addr, 20*time.Second)
			var after atomic.Int64
			napper := jobs.MustDefine("napper", func(i int) string { return fmt.Sprint(i) }, jobs.NoTenant[int](),
				func(ctx *jobs.Ctx, in int) (int, error) {
					if err := jobs.Sleep(ctx, "nap", 1500*time.Millisecond); err != nil {
						return 0, err
					}
					return jobs.Step(ctx, "after", func(context.Context) (int, error) { return int(after.Add(1)), nil })
				})
			w := remoteWorkerAt(t, "http://"+addr, napper)
			const runs = 3
			var ids []string
			for i := range runs {
				res, err := napper.Enqueue(context.Background(), e.eng, i)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, res.RunID)
			}
			testenv.AwaitParked(t, w, runs)
			before := st.Count()
			// The wake-ups land while no claim can: each is folded into its run's ledger before a
			// claim sees the run (testenv.ClaimGate).
			gate.Hold()
			defer gate.Release() // should the test end here
			for _, id := range ids {
				awaitState(t, e.eng, id, store.StateReady, 10*time.Second)
			}
			gate.AwaitTimerFolds()
			gate.Release()
			for _, id := range ids {
				awaitState(t, e.eng, id, store.StateCompleted, 10*time.Second)
			}
			if got := st.Count() - before; got != 0 {
				t.Errorf("%d history reads for %d timer wake-ups of parked runs; want none", got, runs)
			}
			if after.Load() != runs {
				t.Errorf("the step after the nap ran %d times, want %d", after.Load(), runs)
			}
		})
	}
}
