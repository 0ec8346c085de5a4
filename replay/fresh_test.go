package replay_test

import (
	"context"
	"time"

	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/replay"
)

// A fresh claim starts from its input without a RunStarted event (Config.Fresh): the body gets
// the input, and its first step is recorded after seq 1, as if the event had been folded.
func TestFreshStartWithoutEvents(t *testing.T) {
	t.Parallel()
	input, _ := jobs.Encode("in")
	def := jobs.MustDefine("fresh", func(in string) string { return in }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, in string) (string, error) {
			return jobs.Step(c, "s", func(ctx context.Context) (string, error) { return in + "!", nil })
		})
	g := &gateRecorder{seq: 1, first: make(chan struct{}), entered: make(chan struct{})}
	close(g.first)
	cfg := replay.Config{Def: def, Info: jobs.RunInfo{RunID: "r", Job: "fresh", Attempt: 1}, Recorder: g, Fresh: true, FreshInput: input}
	_, out, err := replay.Start(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := <-out
	if o.Kind != replay.Completed {
		t.Fatalf("outcome %v: %v", o.Kind, o.Err)
	}
	var res string
	if err := jobs.Decode(o.Result, &res); err != nil || res != "in!" {
		t.Fatalf("result %q, %v", res, err)
	}
	// (The recorder keeps the command slice, which the execution reuses: count, not contents.)
	if len(g.after) != 1 || g.after[0] != 1 || len(g.records[0]) != 1 {
		t.Fatalf("%d records after seqs %v, want one after seq 1", len(g.records), g.after)
	}
	// Without Fresh, an empty history has no RunStarted and is refused, as before; so is a
	// fresh start given events.
	cfg.Fresh = false
	if _, _, err := replay.Start(t.Context(), cfg, nil); jobs.CodeOf(err) != jobs.CodeInvariant {
		t.Fatalf("no history: %v", err)
	}
	started := history.New(time.Now(), history.RunStarted{Job: "fresh", Input: input, NoTenant: true})
	started.Seq = 1
	cfg.Fresh = true
	if _, _, err := replay.Start(t.Context(), cfg, []history.Event{started}); jobs.CodeOf(err) != jobs.CodeInvariant {
		t.Fatalf("fresh with events: %v", err)
	}
}
