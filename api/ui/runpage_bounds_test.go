package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// recordSteps records steps of these outputs (nil: none) on runID, claimed by a worker on
// queue, at most 400 commands a record.
func recordSteps(t *testing.T, env *testenv.Env, runID, queue string, names []string, outputs [][]byte) {
	t.Helper()
	ctx := context.Background()
	testenv.Declare(t, env.Engine, "w", testenv.Untyped(queue, queue))
	tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{queue}, Max: 1})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("poll: %v %v", tasks, err)
	}
	seq := tasks[0].LastSeq
	for from := 0; from < len(names); {
		var cmds []frontend.Command
		size := 0
		for ; from < len(names) && len(cmds) < 400 && size < 4<<20; from++ {
			var out []byte
			if outputs != nil {
				out = outputs[from]
			}
			cmds = append(cmds, frontend.Command{Kind: frontend.CmdStep, Name: names[from], Output: out})
			size += len(out)
		}
		resp, err := env.Engine.Record(ctx, frontend.RecordRequest{RunID: runID, Fence: tasks[0].Fence, WorkerID: "w", LeaseToken: tasks[0].LeaseToken,
			AfterSeq: seq, Commands: cmds})
		if err != nil {
			t.Fatal(err)
		}
		seq = resp.LastSeq
	}
}

// stepsSection is the Steps card of a run page.
func stepsSection(t *testing.T, page string) string {
	t.Helper()
	i := strings.Index(page, "<h2>Steps")
	j := strings.Index(page, "<h2>History")
	if i < 0 || j < i {
		t.Fatal("the run page has no Steps and History sections")
	}
	return page[i:j]
}

// A run page is bounded in bytes, not only in events: each payload it shows (input, result, a
// step's output, an event's payload) is cut to 64 KiB of the page and says how much it left
// out and where to read it whole, and the Steps table and the timeline each show at most 1 MiB
// of payloads, newest first. Before, each output was rendered whole twice (Steps and History),
// so a dozen legal 1 MiB steps made a page of 144 MB.
func TestRunPageIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	ctx := context.Background()
	in, _ := jobs.Encode(map[string]string{"big": strings.Repeat("i", 200<<10)})
	res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "big", Queue: "big", Key: "big", NoTenant: true, Input: in})
	if err != nil {
		t.Fatal(err)
	}
	// 20 steps of 70 KiB each (over the per-payload cap; 16 cut ones would fill a section's
	// budget), then two of 256 KiB of '<' (escaped 4 times over on the page), then a small one.
	var names []string
	var outs [][]byte
	for i := range 20 {
		o, _ := jobs.Encode(fmt.Sprintf("step%02d:", i) + strings.Repeat("x", 70<<10))
		names, outs = append(names, fmt.Sprintf("s%02d", i)), append(outs, o)
	}
	lt, _ := jobs.Encode(strings.Repeat("<", 256<<10))
	small, _ := jobs.Encode(map[string]string{"small": "whole"})
	names = append(names, "lt1", "lt2", "small")
	outs = append(outs, lt, lt, small)
	recordSteps(t, env, res.RunID, "big", names, outs)

	b := newBrowser(t, serve(t, env, ""))
	st, page := b.get("/_x/runs/" + res.RunID)
	want(t, "run page", st, page, http.StatusOK, "engine history dump "+res.RunID+"</code> shows it whole", "&#34;whole&#34;")
	stored := len(in)
	for _, o := range outs {
		stored += len(o)
	}
	t.Logf("%d bytes of input and outputs stored: a page of %d bytes", stored, len(page))
	// Input 64 KiB, Steps and History 1 MiB each, plus the rows.
	if len(page) > 2<<20+64<<10+200<<10 {
		t.Errorf("the run page is %d bytes: its payloads are not bounded", len(page))
	}
	steps := stepsSection(t, page)
	// The newest outputs are shown, cut (64 KiB each: the small one, the two of '<', then about 14
	// of these fill the 1 MiB); the oldest are past the section's budget and show only their size.
	for i, shownWant := range map[int]bool{19: true, 8: true, 4: false, 0: false} {
		if got := strings.Contains(steps, fmt.Sprintf(`<pre class="json">&#34;step%02d:x`, i)); got != shownWant {
			t.Errorf("step %02d's output shown: %v, want %v", i, got, shownWant)
		}
	}
	if n := strings.Count(steps, "… cut: "); n != 22 {
		t.Errorf("%d outputs say they are cut, want 22 (all but the small one)", n)
	}
	if n := strings.Count(page, "&#34;whole&#34;"); n < 2 {
		t.Errorf("the small output shows %d times, want whole in Steps and History", n)
	}
	if strings.Count(steps, strings.Repeat("&lt;", 20<<10)) != 0 {
		t.Error("an output of '<' is shown past 64 KiB of the page")
	}
}

// historyReads records the history reads of the store.
type historyReads struct {
	*memory.Store
	mu    sync.Mutex
	after []int64
}

func (s *historyReads) HistoryRead(ctx context.Context, runID string, afterSeq int64, limit int) ([]history.Event, error) {
	s.mu.Lock()
	s.after = append(s.after, afterSeq)
	s.mu.Unlock()
	return s.Store.HistoryRead(ctx, runID, afterSeq, limit)
}

func (s *historyReads) take() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.after
	s.after = nil
	return out
}

// The Steps table is capped as the timeline is (the newest 1,000, and it says so, with a way to
// all of them), and the timeline reads only the events it shows from the store.
func TestRunPageStepsAreCapped(t *testing.T) {
	t.Parallel()
	st := &historyReads{Store: memory.New()}
	env := testenv.Start(t, testenv.Options{Store: st})
	res, err := env.Engine.Enqueue(context.Background(), jobs.EnqueueRequest{Job: "long", Queue: "long", Key: "l", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range 1200 {
		names = append(names, fmt.Sprintf("s%04d", i))
	}
	recordSteps(t, env, res.RunID, "long", names, nil)

	b := newBrowser(t, serve(t, env, ""))
	st.take()
	code, page := b.get("/_x/runs/" + res.RunID)
	reads := st.take()
	want(t, "long run", code, page, http.StatusOK, `id="steps-truncated"`, "1200 durable calls", "Show all 1200", "s1199", "1201 events")
	steps := stepsSection(t, page)
	if n := strings.Count(steps, `<tr class="st-`); n != 1000 {
		t.Errorf("the Steps table has %d rows, want the newest 1000", n)
	}
	if strings.Contains(steps, ">s0199<") || !strings.Contains(steps, ">s0200<") {
		t.Error("the Steps table does not hold the newest 1000 calls")
	}
	whole := 0
	for _, a := range reads {
		if a == 0 {
			whole++
		}
	}
	if whole > 1 || !slices.Contains(reads, 201) {
		t.Errorf("the page read the history from seqs %v: want the timeline read after seq 201 (the newest 1000 of 1201), and no second read of all", reads)
	}

	code, page = b.get("/_x/runs/" + res.RunID + "?history=all")
	want(t, "long run, all", code, page, http.StatusOK, "s0000")
	if n := strings.Count(stepsSection(t, page), `<tr class="st-`); n != 1200 || strings.Contains(page, `id="steps-truncated"`) {
		t.Errorf("?history=all: the Steps table has %d rows, want 1200", n)
	}
}
