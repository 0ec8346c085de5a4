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

// The threshold for a second commit in flight follows the runs that come back: after a commit
// of two records whose runs continue, two waiting records start a commit beside the one in
// flight, though OverlapAt is 4. With a fixed threshold they waited for the first to finish.
func TestGroupCommitOverlapFollowsTheRunsThatContinue(t *testing.T) {
	t.Parallel()
	st := &gatedApplies{Store: memory.New(), entered: make(chan int, 16), release: make(chan struct{}, 16)}
	eng, err := engine.New(engine.Config{Store: st, Logger: testenv.Logger(), AllowUndeclared: true, OverlapAt: 4,
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
	const runs = 6
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
	record := func(task frontend.Task) {
		defer wg.Done()
		// A step: the run goes on running, so its body would record again.
		_, err := eng.Record(ctx, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, AfterSeq: task.LastSeq,
			WorkerID: "w1", LeaseToken: task.LeaseToken, Commands: []frontend.Command{{Kind: frontend.CmdStep, Name: "s", Output: out}}})
		errs <- err
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
	// A commit of one, then two records queued behind it: fewer than OverlapAt, they wait.
	wg.Add(1)
	go record(tasks[0])
	entered(1, "the first commit")
	wg.Add(2)
	go record(tasks[1])
	go record(tasks[2])
	quiet("two records behind a commit in flight, OverlapAt 4")
	st.release <- struct{}{}
	entered(2, "the commit after it")
	st.release <- struct{}{}
	wg.Wait()
	// That commit's two runs continue: two records now start a second commit in flight.
	wg.Add(1)
	go record(tasks[3])
	entered(1, "the third commit")
	wg.Add(2)
	go record(tasks[4])
	go record(tasks[5])
	entered(2, "a second commit beside the third, once as many records wait as runs came back")
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
