package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// heldApplies is a store whose group commits (RunApply) wait, once armed, until released: a
// test sees how many are in flight at once.
type heldApplies struct {
	store.Store
	armed   atomic.Bool
	entered chan int // the batch size of each RunApply that started
	release chan struct{}
}

func (h *heldApplies) RunApply(ctx context.Context, ms []store.Mutation) ([]store.MutationResult, error) {
	if h.armed.Load() {
		h.entered <- len(ms)
		<-h.release
	}
	return h.Store.RunApply(ctx, ms)
}

// startHeld starts an engine over a heldApplies store with cfg (Store and Logger filled in),
// enqueues n overlap runs from first on, and polls until it holds their n tasks.
func startHeld(t *testing.T, cfg engine.Config, first, n int) (*engine.Engine, *heldApplies, []frontend.Task) {
	t.Helper()
	st := &heldApplies{Store: memory.New(), entered: make(chan int, 16), release: make(chan struct{})}
	cfg.Store, cfg.Logger, cfg.AllowUndeclared, cfg.PollFallback = st, testenv.Logger(), true, 50*time.Millisecond
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = eng.Stop(stop)
	})
	testenv.Declare(t, eng, "w1", overlapJob)
	ctx := t.Context()
	for i := 0; i < n; i++ {
		if _, err := overlapJob.Enqueue(ctx, eng, first+i); err != nil {
			t.Fatal(err)
		}
	}
	var tasks []frontend.Task
	for len(tasks) < n {
		got, err := eng.Poll(ctx, frontend.PollRequest{WorkerID: "w1", Queues: []string{jobs.DefaultQueue}, Max: n, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, got...)
	}
	return eng, st, tasks
}

var overlapJob = jobs.MustDefine("overlap", func(i int) string { return fmt.Sprint(i) }, jobs.NoTenant[int](),
	func(*jobs.Ctx, int) (int, error) { return 0, nil })

// With one group commit in flight, a second starts only once OverlapAt records wait for it: a
// lone record waits for the commit in flight (batches stay large), a full batch does not.
func TestGroupCommitOverlapsWhenFull(t *testing.T) {
	t.Parallel()
	const runs = 5
	eng, st, tasks := startHeld(t, engine.Config{OverlapAt: 3}, 0, runs)
	ctx := t.Context()
	out, _ := jobs.Encode(1)
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	record := func(task frontend.Task) {
		defer wg.Done()
		_, err := eng.Record(ctx, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, AfterSeq: task.LastSeq,
			WorkerID: "w1", LeaseToken: task.LeaseToken, Commands: []frontend.Command{{Kind: frontend.CmdStep, Name: "s", Output: out}}})
		errs <- err
	}
	st.armed.Store(true)
	released := false
	defer func() {
		if !released {
			close(st.release)
		}
	}()
	wg.Add(1)
	go record(tasks[0])
	if n := <-st.entered; n != 1 {
		t.Fatalf("the first commit carries %d records, want 1", n)
	}
	// Two more: fewer than OverlapAt wait, so they stay queued behind the commit in flight.
	wg.Add(2)
	go record(tasks[1])
	go record(tasks[2])
	select {
	case n := <-st.entered:
		t.Fatalf("a second commit of %d records started with fewer than OverlapAt waiting", n)
	case <-time.After(200 * time.Millisecond):
	}
	// A third fills the batch: it goes while the first is still in flight.
	wg.Add(1)
	go record(tasks[3])
	select {
	case n := <-st.entered:
		if n != 3 {
			t.Fatalf("the overlapping commit carries %d records, want the 3 waiting", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("three records waited behind a commit in flight and no second commit started")
	}
	// With two in flight, the next record waits for one to finish.
	wg.Add(1)
	go record(tasks[4])
	released = true
	close(st.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, task := range tasks {
		run, err := st.RunGet(ctx, task.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if run.LastSeq != task.LastSeq+1 {
			t.Errorf("run %s: last seq %d, want %d (its step recorded once)", task.RunID, run.LastSeq, task.LastSeq+1)
		}
	}
}

// With no commit in flight, a group commit waits for the runs the previous one answered to
// send their next records, so two cohorts of runs do not alternate in half batches: the record
// queued behind a commit goes together with the next record of the run that commit answered.
func TestGroupCommitGathersTheAnsweredRuns(t *testing.T) {
	t.Parallel()
	// GatherWait far longer than the test: only the answered run's record ends the wait.
	eng, st, tasks := startHeld(t, engine.Config{OverlapAt: 16, GatherWait: time.Hour}, 100, 2)
	ctx := t.Context()
	out, _ := jobs.Encode(1)
	record := func(task frontend.Task, afterSeq int64, name string) (frontend.RecordResponse, error) {
		return eng.Record(ctx, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, AfterSeq: afterSeq,
			WorkerID: "w1", LeaseToken: task.LeaseToken, Commands: []frontend.Command{{Kind: frontend.CmdStep, Name: name, Output: out}}})
	}
	st.armed.Store(true)
	released := false
	defer func() {
		if !released {
			close(st.release)
		}
	}()
	// Run A's step commits alone and is held; run B's step queues behind it.
	aDone := make(chan frontend.RecordResponse, 1)
	errs := make(chan error, 3)
	go func() {
		resp, err := record(tasks[0], tasks[0].LastSeq, "s1")
		errs <- err
		aDone <- resp
	}()
	if n := <-st.entered; n != 1 {
		t.Fatalf("the first commit carries %d records, want 1", n)
	}
	bDone := make(chan struct{})
	go func() {
		_, err := record(tasks[1], tasks[1].LastSeq, "s1")
		errs <- err
		close(bDone)
	}()
	// A's commit is let go only once B waits in the queue behind it.
	for engine.QueuedRecords(eng) == 0 {
		time.Sleep(time.Millisecond)
	}
	st.release <- struct{}{}
	respA := <-aDone
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	// A is answered and still running: the committer waits for its next record rather than
	// sending B's alone.
	go func() {
		_, err := record(tasks[0], respA.LastSeq, "s2")
		errs <- err
	}()
	if n := <-st.entered; n != 2 {
		t.Fatalf("the commit after the first carries %d records, want 2 (B queued and A's next)", n)
	}
	released = true
	close(st.release)
	<-bDone
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
