package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// gatedApplies is a store whose group commits, once armed, each wait for a token of their own.
type gatedApplies struct {
	store.Store
	entered chan int
	release chan struct{}
}

func (g *gatedApplies) RunApply(ctx context.Context, ms []store.Mutation) ([]store.MutationResult, error) {
	g.entered <- len(ms)
	<-g.release
	return g.Store.RunApply(ctx, ms)
}

// After a commit of claims' last records (completions), a second commit in flight waits for a
// deeper batch: their slots already went to the next claims, so the wait costs no run its
// latency and saves commits. After steps, OverlapAt holds again.
func TestGroupCommitOverlapDeepensAfterCompletions(t *testing.T) {
	t.Parallel()
	st := &gatedApplies{Store: memory.New(), entered: make(chan int, 16), release: make(chan struct{}, 16)}
	eng, err := engine.New(engine.Config{Store: st, Logger: testenv.Logger(), AllowUndeclared: true, OverlapAt: 2,
		PollFallback: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 16 {
			st.release <- struct{}{} // no commit is left waiting at the stop
		}
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = eng.Stop(stop)
	})
	testenv.Declare(t, eng, "w1", overlapJob)
	const runs = 8
	for i := 0; i < runs; i++ {
		if _, err := overlapJob.Enqueue(ctx, eng, i); err != nil {
			t.Fatal(err)
		}
	}
	var tasks []frontend.Task
	for len(tasks) < runs {
		got, err := eng.Poll(ctx, frontend.PollRequest{WorkerID: "w1", Queues: []string{jobs.DefaultQueue}, Max: runs, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, got...)
	}
	out, _ := jobs.Encode(1)
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	record := func(task frontend.Task, kind frontend.CommandKind) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := frontend.Command{Kind: kind, Output: out}
			if kind == frontend.CmdStep {
				cmd.Name = "s"
			}
			_, err := eng.Record(ctx, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, AfterSeq: task.LastSeq,
				WorkerID: "w1", LeaseToken: task.LeaseToken, Commands: []frontend.Command{cmd}})
			errs <- err
		}()
	}
	entered := func(want int, what string) {
		t.Helper()
		select {
		case n := <-st.entered:
			if n != want {
				t.Fatalf("%s carries %d records, want %d", what, n, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not start", what)
		}
	}
	quiet := func(what string) {
		t.Helper()
		select {
		case n := <-st.entered:
			t.Fatalf("%s: a commit of %d records started", what, n)
		case <-time.After(200 * time.Millisecond):
		}
	}
	// A commit of one completion: its run's claim ends.
	record(tasks[0], frontend.CmdComplete)
	entered(1, "the completion's commit")
	st.release <- struct{}{}
	wg.Wait()
	// Another commit in flight, then two completions: OverlapAt (2) wait, but after a batch of
	// completions a second commit waits for more.
	record(tasks[1], frontend.CmdComplete)
	entered(1, "the next completion's commit")
	record(tasks[2], frontend.CmdComplete)
	record(tasks[3], frontend.CmdComplete)
	quiet("two completions behind a commit in flight, after a batch of completions")
	// Once the one in flight finishes (a batch of completions again), they go together.
	st.release <- struct{}{}
	entered(2, "the waiting completions' commit")
	st.release <- struct{}{}
	wg.Wait()
	// A batch of steps brings OverlapAt back: two steps behind a commit in flight go at once.
	record(tasks[4], frontend.CmdStep)
	entered(1, "the first step's commit")
	st.release <- struct{}{}
	wg.Wait()
	record(tasks[5], frontend.CmdStep)
	entered(1, "a step's commit")
	record(tasks[6], frontend.CmdStep)
	record(tasks[7], frontend.CmdStep)
	entered(2, "a second commit beside it, once OverlapAt steps wait")
	st.release <- struct{}{}
	st.release <- struct{}{}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
