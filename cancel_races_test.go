package jobs_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// cancelRaces cancels a run from inside the store call that carries out one of its effects, or
// takes one of its slots: a cancel committing in the window between the engine's check of the
// run and the effect (or the slot).
type cancelRaces struct {
	store.Store
	eng atomic.Pointer[engine.Engine]

	// atCreate: cancel the run whose durable enqueue (dedupe id "call:<run>/…") is about to be
	// made, before it is made.
	atCreate atomic.Bool
	// afterPublish: cancel the run once the event with this id is published.
	afterPublish atomic.Pointer[string]
	// atSlot: cancel the slot's holder before the n-th slot acquisition from now (0: never).
	atSlot atomic.Int32

	mu        sync.Mutex
	published []string
}

func (s *cancelRaces) cancel(ctx context.Context, runID string) error {
	_, err := s.eng.Load().Cancel(ctx, runID, "operator cancel racing the engine")
	return err
}

func (s *cancelRaces) RunCreateOnce(ctx context.Context, p store.OnceParams) (store.CreateRunResult, error) {
	if rest, ok := strings.CutPrefix(p.ID, "call:"); ok && s.atCreate.CompareAndSwap(true, false) {
		runID, _, _ := strings.Cut(rest, "/")
		if err := s.cancel(ctx, runID); err != nil {
			return store.CreateRunResult{}, err
		}
	}
	return s.Store.RunCreateOnce(ctx, p)
}

func (s *cancelRaces) RunPublish(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	res, err := s.Store.RunPublish(ctx, p)
	if err != nil {
		return res, err
	}
	s.mu.Lock()
	s.published = append(s.published, p.ID)
	s.mu.Unlock()
	if id := s.afterPublish.Load(); id != nil && *id == p.ID && s.afterPublish.CompareAndSwap(id, nil) {
		rest, _ := strings.CutPrefix(p.ID, "call:")
		runID, _, _ := strings.Cut(rest, "/")
		if err := s.cancel(ctx, runID); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (s *cancelRaces) SlotAcquire(ctx context.Context, p store.SlotParams) (bool, error) {
	if n := s.atSlot.Load(); n > 0 && s.atSlot.CompareAndSwap(n, n-1) && n == 1 {
		if err := s.cancel(ctx, p.Holder); err != nil {
			return false, err
		}
	}
	return s.Store.SlotAcquire(ctx, p)
}

func (s *cancelRaces) publishedIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.published...)
}

// startRaces starts an engine over a cancelRaces store of backend b, with "sync" declared with
// opts, and claims one run of it.
func startRaces(t *testing.T, b testenv.Backend, opts ...jobs.Option) (*testenv.Env, *cancelRaces, frontend.Task) {
	t.Helper()
	st := &cancelRaces{Store: b.Open(t)}
	env := testenv.Start(t, testenv.Options{Store: st})
	st.eng.Store(env.Engine)
	testenv.Declare(t, env.Engine, "w", syncJob(opts...))
	enqueue(t, env, syncJob(opts...), syncInput{Customer: "a", N: 1})
	tasks := pollAll(t, env.Engine, "w")
	if len(tasks) != 1 {
		t.Fatalf("claimed %d runs, want 1", len(tasks))
	}
	return env, st, tasks[0]
}

func recordAs(t *testing.T, env *testenv.Env, task frontend.Task, cmds ...frontend.Command) error {
	t.Helper()
	_, err := env.Engine.Record(t.Context(), frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w",
		LeaseToken: task.LeaseToken, AfterSeq: task.LastSeq, Commands: cmds})
	return err
}

func spawnCmd(t *testing.T, key string) frontend.Command {
	t.Helper()
	in, err := jobs.Encode(syncInput{Customer: "a", N: 99})
	if err != nil {
		t.Fatal(err)
	}
	return frontend.Command{Kind: frontend.CmdEnqueue, Name: "spawn",
		Effect: &frontend.Effect{Job: "sync", Queue: "sync", Key: key, Tenant: "a", Input: in}}
}

func runsWithKey(t *testing.T, env *testenv.Env, key string) []store.Run {
	t.Helper()
	runs, err := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "sync", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var out []store.Run
	for _, r := range runs {
		if r.Key == key {
			out = append(out, r)
		}
	}
	return out
}

// A run is cancelled after its record's claim check and before its durable enqueue is made: the
// record is refused X_ABORTED, and the run the enqueue created is cancelled with it (the engine
// reads the enqueuer again once the run exists), never left to run for a cancelled run whose
// history does not show the call.
func TestCancelBeforeEnqueueCancelsTheEnqueuedRun(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			env, st, task := startRaces(t, b)
			st.atCreate.Store(true)
			err := recordAs(t, env, task, spawnCmd(t, "child-99"))
			if !jobs.HasCode(err, jobs.CodeAborted) {
				t.Fatalf("record: %v, want %s", err, jobs.CodeAborted)
			}
			if r, _ := env.Engine.GetRun(t.Context(), task.RunID); r.State != store.StateCancelled {
				t.Fatalf("enqueuer %s, want cancelled", r.State)
			}
			runs := runsWithKey(t, env, "child-99")
			if len(runs) != 1 {
				t.Fatalf("%d enqueued runs, want the one created before the re-read", len(runs))
			}
			r := runs[0]
			if r.State != store.StateCancelled {
				t.Fatalf("enqueued run %s is %s: a cancelled run's refused record enqueued a live run", r.ID, r.State)
			}
			reason := ""
			for _, ev := range env.History(r.ID) {
				if ev.Kind == history.KindRunCancelled {
					p, err := ev.Decode()
					if err != nil {
						t.Fatal(err)
					}
					reason = p.(history.RunCancelled).Reason
				}
			}
			if !strings.Contains(reason, task.RunID) || !strings.Contains(reason, "enqueued it") {
				t.Errorf("enqueued run cancelled with reason %q; want it to name its enqueuer %s", reason, task.RunID)
			}
		})
	}
}

// The same race where the enqueue is deduped onto a live run that already held the key: that run
// was not made by the call, and the enqueuer's cancel leaves it alone.
func TestCancelBeforeADedupedEnqueueLeavesTheExistingRun(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			env, st, task := startRaces(t, b)
			other := enqueue(t, env, syncJob(), syncInput{Customer: "a", N: 99}) // key a-99
			st.atCreate.Store(true)
			err := recordAs(t, env, task, spawnCmd(t, "a-99"))
			if !jobs.HasCode(err, jobs.CodeAborted) {
				t.Fatalf("record: %v, want %s", err, jobs.CodeAborted)
			}
			if r, _ := env.Engine.GetRun(t.Context(), other); r.State != store.StateReady {
				t.Errorf("the pre-existing run %s the enqueue was deduped onto is %s (%q), want ready", other, r.State, r.Error)
			}
		})
	}
}

// A record holds two publishes; the run is cancelled once the first is out. The second is not
// published: each publish is checked against the record's claim in its own transaction. (The
// first is out: an event cannot be taken back. TestClaimLostRightBeforeThePublishPublishesNothing
// covers a cancel that commits right before the store's publish.)
func TestCancelBetweenPublishesStopsTheNext(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			env, st, task := startRaces(t, b)
			first := "call:" + task.RunID + "/p1"
			st.afterPublish.Store(&first)
			err := recordAs(t, env, task,
				frontend.Command{Kind: frontend.CmdPublish, Name: "p1", Event: "told", Output: []byte{0xc0}},
				frontend.Command{Kind: frontend.CmdPublish, Name: "p2", Event: "told", Output: []byte{0xc0}})
			if !jobs.HasCode(err, jobs.CodeAborted) {
				t.Fatalf("record: %v, want %s", err, jobs.CodeAborted)
			}
			for _, id := range st.publishedIDs() {
				if id == "call:"+task.RunID+"/p2" {
					t.Errorf("published %s for a run cancelled before it (published: %v)", id, st.publishedIDs())
				}
			}
		})
	}
}

// A claimed run is cancelled just before the poll takes its slot (the n-th acquisition: 1 the
// job's cap, or the only keyed slot; 2 the keyed slot after the job's): the cancel released
// nothing. The poll reads the run again once its slots are taken, releases them and hands the
// claim out to no one, so the next run of the job is admitted at once.
func TestCancelBetweenClaimAndSlotReleasesIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []jobs.Option
		at   int32
	}{
		{"job cap", []jobs.Option{jobs.Concurrency(1)}, 1},
		{"keyed cap", []jobs.Option{jobs.ConcurrencyBy(jobs.ByInput("customer"), 1)}, 1},
		{"both, at the keyed slot", []jobs.Option{jobs.Concurrency(1), jobs.ConcurrencyBy(jobs.ByInput("customer"), 1)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, b := range testenv.Backends() {
				t.Run(b.Name, func(t *testing.T) {
					st := &cancelRaces{Store: b.Open(t)}
					env := testenv.Start(t, testenv.Options{Store: st})
					st.eng.Store(env.Engine)
					j := syncJob(tc.opts...)
					testenv.Declare(t, env.Engine, "w", j)
					first := enqueue(t, env, j, syncInput{Customer: "a", N: 1})
					st.atSlot.Store(tc.at)
					if tasks := pollAll(t, env.Engine, "w"); len(tasks) != 0 {
						t.Errorf("the poll handed out %d task(s) of a run cancelled before its slot", len(tasks))
					}
					if r, _ := env.Engine.GetRun(t.Context(), first); r.State != store.StateCancelled {
						t.Fatalf("first run %s; the hook did not cancel it", r.State)
					}
					second := enqueue(t, env, j, syncInput{Customer: "a", N: 2})
					tasks := pollAll(t, env.Engine, "w")
					if len(tasks) != 1 || tasks[0].RunID != second {
						r, _ := env.Engine.GetRun(t.Context(), second)
						t.Errorf("the next run of the capped job was not admitted (%d tasks, it is %s): the cancelled run %s holds the slot",
							len(tasks), r.State, first)
					}
				})
			}
		})
	}
}
