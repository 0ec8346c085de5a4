package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/race"
	"github.com/ultimat3/jobs/replay"
)

// A long history is replayed whenever a run resumes away from the worker that parked it, so its
// cost per event is a budget: this pins the allocations per replayed step (a pooled decoder for
// the event and for the step's output, no boxed payload, one capture per Step call). It counts
// allocations, never time; before the budget was set a replayed step made 11.
func TestReplayAllocationsPerEvent(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items, so allocation counts are not the product's")
	}
	const n = 2000
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	in, _ := jobs.Encode(1)
	out, _ := jobs.Encode(7)
	events := []history.Event{history.New(at, history.RunStarted{Job: "allocs", Input: in, Key: "k", NoTenant: true})}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("s%d", i)
		events = append(events, history.New(at, history.StepCompleted{StepName: names[i], Output: out}))
	}
	for i := range events {
		events[i].Seq = int64(i + 1)
	}
	live := 0
	j := jobs.MustDefine("allocs", func(int) string { return "k" }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, in int) (int, error) {
			for _, name := range names {
				v, err := jobs.Step(c, name, func(context.Context) (int, error) { live++; return 0, nil })
				if err != nil {
					return 0, err
				}
				if v != 7 {
					return 0, fmt.Errorf("step %s replayed %d, recorded 7", name, v)
				}
			}
			return 0, nil
		})
	var err error
	allocs := testing.AllocsPerRun(5, func() {
		if e := replay.Check(context.Background(), j, events); e != nil {
			err = e
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if live != 0 {
		t.Fatalf("%d steps ran live; a replay of a recorded history runs none", live)
	}
	perEvent := allocs / n
	t.Logf("%.2f allocations per replayed step", perEvent)
	if perEvent > 8 {
		t.Fatalf("replaying a step allocates %.2f times, the budget is 8 (it was 11 before pooling)", perEvent)
	}
}
