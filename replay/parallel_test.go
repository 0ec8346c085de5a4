package replay_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/replay"
)

// gateRecorder answers records as an engine would (each event the next seq), holding the first
// one until released, and remembers every record's after_seq and commands.
type gateRecorder struct {
	mu      sync.Mutex
	seq     int64
	records [][]frontend.Command
	after   []int64
	first   chan struct{}
	entered chan struct{}
}

func (g *gateRecorder) Record(ctx context.Context, cmds []frontend.Command) (frontend.RecordResponse, error) {
	g.mu.Lock()
	n := len(g.records)
	g.records = append(g.records, cmds)
	g.after = append(g.after, g.seq)
	g.mu.Unlock()
	if n == 0 {
		close(g.entered)
		<-g.first
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return answerSteps(&g.seq, cmds), nil
}

// answerSteps answers cmds as an engine would: each a StepCompleted at the seq after *seq.
func answerSteps(seq *int64, cmds []frontend.Command) frontend.RecordResponse {
	var resp frontend.RecordResponse
	for _, c := range cmds {
		*seq++
		ev := history.New(time.Now(), history.StepCompleted{StepName: c.Name, Output: c.Output, Parallel: c.Parallel})
		ev.Seq = *seq
		resp.Appended = append(resp.Appended, ev)
	}
	resp.LastSeq = *seq
	return resp
}

// Parallel steps that finish while a record is in flight share the next record, and each
// record is built on the seq the one before it left (the engine's after_seq check).
func TestParallelStepsShareRecordsInFlight(t *testing.T) {
	t.Parallel()
	input, _ := jobs.Encode("x")
	started := history.New(time.Now(), history.RunStarted{Job: "fan", Queue: jobs.DefaultQueue, Input: input, Key: "x", NoTenant: true})
	started.Seq = 1
	g := &gateRecorder{seq: 1, first: make(chan struct{}), entered: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(3)
	// No step returns before all three are started, so whichever finishes first is recorded
	// alone (and held below) while the other two finish and queue for the next record.
	allStarted := make(chan struct{})
	def := jobs.MustDefine("fan", func(in string) string { return in }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, in string) (int, error) {
			step := func(n int) func(context.Context) (int, error) {
				return func(context.Context) (int, error) { <-allStarted; wg.Done(); return n, nil }
			}
			a, b, d := jobs.Go(c, "a", step(1)), jobs.Go(c, "b", step(2)), jobs.Go(c, "c", step(3))
			close(allStarted)
			if err := jobs.AwaitAll(c, a, b, d); err != nil {
				return 0, err
			}
			av, _ := a.Await(c)
			bv, _ := b.Await(c)
			dv, _ := d.Await(c)
			return av + bv + dv, nil
		})
	ex, out, err := replay.Start(t.Context(), replay.Config{Def: def, Info: jobs.RunInfo{RunID: "r", Job: "fan", Attempt: 1}, Recorder: g}, []history.Event{started})
	if err != nil {
		t.Fatal(err)
	}
	<-g.entered // one record is in flight
	wg.Wait()   // every step has returned
	time.Sleep(20 * time.Millisecond)
	close(g.first)
	o := <-out
	<-ex.Exited()
	if o.Kind != replay.Completed {
		t.Fatalf("outcome %v: %v", o.Kind, o.Err)
	}
	var sum int
	if err := jobs.Decode(o.Result, &sum); err != nil || sum != 6 {
		t.Fatalf("result %d (%v)", sum, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	cmds := 0
	for _, r := range g.records {
		cmds += len(r)
	}
	if cmds != 3 || len(g.records) != 2 {
		t.Errorf("%d records holding %d steps, want the two steps that finished during the first record to share the second", len(g.records), cmds)
	}
	if len(g.after) == 2 && (g.after[0] != 1 || g.after[1] != 1+int64(len(g.records[0]))) {
		t.Errorf("records built on seqs %v", g.after)
	}
}

// releaseRecorder answers records as an engine would and, once it has recorded the step named
// after, releases the step waiting on release: a step that finishes the moment an earlier one's
// record is answered.
type releaseRecorder struct {
	mu      sync.Mutex
	seq     int64
	after   string
	release chan struct{}
}

func (r *releaseRecorder) Record(ctx context.Context, cmds []frontend.Command) (frontend.RecordResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := answerSteps(&r.seq, cmds)
	for _, c := range cmds {
		if c.Name == r.after {
			close(r.release)
		}
	}
	return resp, nil
}

// A live AwaitFirst names the step recorded first, as the replay will, even when a later step
// records the moment the earlier one's record is answered: a step's future is settled before
// the next record may begin, so no later step is ever seen settled while an earlier one is not.
func TestAwaitFirstLiveIsTheFirstRecorded(t *testing.T) {
	t.Parallel()
	input, _ := jobs.Encode("x")
	started := history.New(time.Now(), history.RunStarted{Job: "race", Queue: jobs.DefaultQueue, Input: input, Key: "x", NoTenant: true})
	started.Seq = 1
	for i := range 2000 {
		rec := &releaseRecorder{seq: 1, after: "early", release: make(chan struct{})}
		def := jobs.MustDefine("race", func(in string) string { return in }, jobs.NoTenant[string](),
			func(c *jobs.Ctx, in string) (int, error) {
				late := jobs.Go(c, "late", func(context.Context) (int, error) { <-rec.release; return 0, nil })
				early := jobs.Go(c, "early", func(context.Context) (int, error) { return 1, nil })
				return jobs.AwaitFirst(c, late, early)
			})
		ex, out, err := replay.Start(t.Context(), replay.Config{Def: def, Info: jobs.RunInfo{RunID: "r", Job: "race", Attempt: 1}, Recorder: rec}, []history.Event{started})
		if err != nil {
			t.Fatal(err)
		}
		o := <-out
		<-ex.Exited()
		var first int
		if o.Kind != replay.Completed || jobs.Decode(o.Result, &first) != nil {
			t.Fatalf("round %d: outcome %v: %v", i, o.Kind, o.Err)
		}
		if first != 1 {
			t.Fatalf("round %d: AwaitFirst returned %d, the step recorded second; the replay would return 1", i, first)
		}
	}
}

// Thousands of parallel steps that finish while one record is in flight go out in records of
// at most frontend.MaxRecordCommands, one after another, each built on the seq the one before it
// left: the engine refuses a longer record, and the steps would have failed.
func TestManyParallelStepsGoInRecordsTheEngineAccepts(t *testing.T) {
	t.Parallel()
	const n = 2*frontend.MaxRecordCommands + 100
	input, _ := jobs.Encode("x")
	started := history.New(time.Now(), history.RunStarted{Job: "wide", Queue: jobs.DefaultQueue, Input: input, Key: "x", NoTenant: true})
	started.Seq = 1
	g := &gateRecorder{seq: 1, first: make(chan struct{}), entered: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(n)
	allStarted := make(chan struct{})
	def := jobs.MustDefine("wide", func(in string) string { return in }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, in string) (int, error) {
			fs := make([]*jobs.Future[int], n)
			for i := range fs {
				fs[i] = jobs.Go(c, fmt.Sprint("s", i), func(context.Context) (int, error) { <-allStarted; wg.Done(); return 1, nil })
			}
			close(allStarted)
			sum := 0
			for _, f := range fs {
				v, err := f.Await(c)
				if err != nil {
					return 0, err
				}
				sum += v
			}
			return sum, nil
		})
	ex, out, err := replay.Start(t.Context(), replay.Config{Def: def, Info: jobs.RunInfo{RunID: "r", Job: "wide", Attempt: 1}, Recorder: g}, []history.Event{started})
	if err != nil {
		t.Fatal(err)
	}
	<-g.entered // one record is in flight
	wg.Wait()   // every step has returned and queued behind it
	close(g.first)
	o := <-out
	<-ex.Exited()
	var sum int
	if o.Kind != replay.Completed || jobs.Decode(o.Result, &sum) != nil || sum != n {
		t.Fatalf("outcome %v (%v), sum %d; want completed, %d", o.Kind, o.Err, sum, n)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	total, seq := 0, int64(1)
	for i, r := range g.records {
		if len(r) > frontend.MaxRecordCommands {
			t.Fatalf("record %d carries %d commands; the engine takes at most %d", i, len(r), frontend.MaxRecordCommands)
		}
		if g.after[i] != seq {
			t.Fatalf("record %d built on seq %d; want %d", i, g.after[i], seq)
		}
		total, seq = total+len(r), seq+int64(len(r))
	}
	if total != n {
		t.Fatalf("%d steps recorded; want %d", total, n)
	}
}
