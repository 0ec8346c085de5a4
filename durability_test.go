package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// A timer that fires late (the engine was down when it came due) says so in the history: the
// event's time is when it fired, its DueAt when it was due, and the trace shows the lateness.
func TestTimerFiredRecordsWhenItFired(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		j := jobs.MustDefine("late-nap", func(in int) string { return "k" }, jobs.NoTenant[int](),
			func(ctx *jobs.Ctx, in int) (int, error) {
				if err := jobs.Sleep(ctx, "nap", time.Hour); err != nil {
					return 0, err
				}
				return jobs.Step(ctx, "after", func(context.Context) (int, error) { return in, nil })
			})
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, 1)
		env.Await(id, store.StateSuspended)
		var due time.Time
		for _, ev := range env.History(id) {
			if p, _ := ev.Decode(); ev.Kind == history.KindTimerStarted {
				due = p.(history.TimerStarted).WakeAt
			}
		}
		// Nothing fires during the outage; the clock moves on 20s past the due time.
		env.Advance(time.Hour + 20*time.Second)
		env.Await(id, store.StateCompleted)

		var fired *history.Event
		for _, ev := range env.History(id) {
			if ev.Kind == history.KindTimerFired {
				fired = &ev
			}
		}
		if fired == nil {
			t.Fatalf("no TimerFired in %v", testenv.Kinds(env.History(id)))
		}
		if want := due.Add(20 * time.Second); !fired.At.Equal(want) {
			t.Errorf("TimerFired at %s, want the firing time %s (due %s)", fired.At, want, due)
		}
		p, err := fired.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if got := p.(history.TimerFired).DueAt; !got.Equal(due) {
			t.Errorf("TimerFired.DueAt %s, want %s", got, due)
		}
		v, err := env.Engine.InspectRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Steps) == 0 || v.Steps[0].Kind != "sleep" || v.Steps[0].LateSeconds != 20 {
			t.Errorf("trace %+v: want the sleep 20s late", v.Steps)
		}
	})
}

// A history written before TimerFired carried its due time still reads: no lateness is shown.
func TestOldTimerFiredDecodes(t *testing.T) {
	old := struct {
		TimerName string `msgpack:"name"`
	}{"nap"}
	data, err := jobs.Encode(old)
	if err != nil {
		t.Fatal(err)
	}
	ev := history.Event{Kind: history.KindTimerFired, Name: "nap", At: time.Unix(100, 0), Data: data}
	p, err := ev.Decode()
	if err != nil {
		t.Fatal(err)
	}
	if f := p.(history.TimerFired); f.TimerName != "nap" || !f.DueAt.IsZero() {
		t.Errorf("decoded %+v, want name nap and no due time", f)
	}
}
