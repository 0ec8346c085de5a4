package jobs_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/internal/uuid7"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// childEnqueued returns the run ids the ChildEnqueued events of a history name, in order.
func childEnqueued(t *testing.T, events []history.Event) []string {
	t.Helper()
	var ids []string
	for _, ev := range events {
		if ev.Kind != history.KindChildEnqueued {
			continue
		}
		p, err := ev.Decode()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.(history.ChildEnqueued).RunID)
	}
	return ids
}

// lastRetrySeq is the seq of the newest RunRetried of a history (0: none).
func lastRetrySeq(events []history.Event) int64 {
	var seq int64
	for _, ev := range events {
		if ev.Kind == history.KindRunRetried {
			seq = ev.Seq
		}
	}
	return seq
}

// A parent's child fails, and so does the parent. The child's code is fixed and the parent is
// retried from the step before its call: the call is made again and starts a new child, under
// the id of the retry's generation, and the parent's wait is for that child (the failure of the
// first, still in the event log's lookback, is not taken for it, nor does the child sweep tell
// it). The parent completes with the new child's result; the first child stays failed. A child
// of a run never retried from a step keeps the id call:<parent>/<name>.
func TestRetryParentFromAStepStartsANewChild(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			var fixed atomic.Bool
			kid := jobs.MustDefine("genkid", func(in order) string { return "genkid:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					if !fixed.Load() {
						return "", jobs.Errorf("X_BROKEN", "broken")
					}
					if _, ok, err := jobs.WaitForEvent[order](c, "go", "gen.go", jobs.Match{"id": in.ID}, time.Hour); err != nil || !ok {
						return "", jobs.Errorf("X_NO_GO", "no go (%v)", err)
					}
					return "kid-ok", nil
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
			parent := jobs.MustDefine("genparent", func(in order) string { return "genparent:" + in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					if _, err := jobs.Step(c, "prep", func(context.Context) (int, error) { return 1, nil }); err != nil {
						return "", err
					}
					return kid.Call(c, "kid", in)
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
			env.Worker(worker.Config{}, kid, parent)
			res, err := parent.Enqueue(t.Context(), env.Engine, order{ID: "g1"})
			if err != nil {
				t.Fatal(err)
			}
			if p := env.Await(res.RunID, store.StateFailed, store.StateCompleted); p.ErrorCode != string(jobs.CodeChildFailed) {
				t.Fatalf("parent %s %s, want failed %s", p.State, p.ErrorCode, jobs.CodeChildFailed)
			}
			kids, err := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "genkid"})
			if err != nil || len(kids) != 1 {
				t.Fatalf("%d children (%v)", len(kids), err)
			}
			first := kids[0].ID
			if !uuid7.HasSeed(first, "call:"+res.RunID+"/kid") {
				t.Errorf("child %s of a run never retried is not made under call:%s/kid", first, res.RunID)
			}

			fixed.Store(true)
			if _, err := env.Engine.Retry(t.Context(), engine.RetryRequest{RunID: res.RunID, FromStep: "prep", By: "op"}); err != nil {
				t.Fatal(err)
			}
			gen := lastRetrySeq(env.History(res.RunID))
			var second string
			for i := 0; i < 10000 && second == ""; i++ {
				if ids := childEnqueued(t, env.History(res.RunID)); len(ids) == 2 {
					second = ids[1]
				}
				time.Sleep(2 * time.Millisecond)
			}
			if second == "" || second == first {
				t.Fatalf("after the retry from the step the call names child %q; want a new child (the first was %s)", second, first)
			}
			if want := "call:" + res.RunID + "@" + strconv.FormatInt(gen, 10) + "/kid"; !uuid7.HasSeed(second, want) {
				t.Errorf("the new child %s is not made under %s", second, want)
			}
			env.Await(second, store.StateSuspended) // the fixed child waits for gen.go
			awaitWaitOn(t, env, res.RunID, gen, second)
			if _, err := env.Engine.TellWaitingParents(t.Context()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
			if p, _ := env.Engine.GetRun(t.Context(), res.RunID); p.State != store.StateSuspended {
				t.Fatalf("parent %s (%s: %s) while its new child is live: it took the first child's failure", p.State, p.ErrorCode, p.Error)
			}
			if _, err := env.Engine.Publish(t.Context(), "gen.go", order{ID: "g1"}); err != nil {
				t.Fatal(err)
			}
			if p := env.Await(res.RunID, store.StateCompleted, store.StateFailed); p.State != store.StateCompleted {
				t.Fatalf("parent %s (%s: %s), want completed with the new child's result", p.State, p.ErrorCode, p.Error)
			}
			out, err := env.Engine.WaitResult(t.Context(), res.RunID)
			var v string
			if err == nil {
				err = out.Decode(&v)
			}
			if err != nil || v != "kid-ok" {
				t.Errorf("parent result %q (%v), want kid-ok", v, err)
			}
			if r, _ := env.Engine.GetRun(t.Context(), first); r.State != store.StateFailed {
				t.Errorf("the first child is %s; want it left failed", r.State)
			}
			if all, _ := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "genkid"}); len(all) != 2 {
				t.Errorf("%d children, want 2", len(all))
			}
		})
	}
}

// awaitWaitOn waits until the parent is suspended on a child wait, recorded after the retry at
// seq gen, whose match names child.
func awaitWaitOn(t *testing.T, env *testenv.Env, parentID string, gen int64, child string) {
	t.Helper()
	keys, err := history.MatchKeys(map[string]any{"run_id": child})
	if err != nil {
		t.Fatal(err)
	}
	want := keys[0]
	for i := 0; i < 10000; i++ {
		for _, ev := range env.History(parentID) {
			if ev.Seq <= gen || ev.Kind != history.KindEventWaitStarted {
				continue
			}
			p, err := ev.Decode()
			if err != nil {
				t.Fatal(err)
			}
			if w := p.(history.EventWaitStarted); slices.Contains(w.Match, want) {
				if r, _ := env.Engine.GetRun(t.Context(), parentID); r.State == store.StateSuspended {
					return
				}
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("parent %s: no wait on child %s after seq %d in %v", parentID, child, gen, testenv.Kinds(env.History(parentID)))
}

// failsApply refuses every RunApply naming run while armed: a record whose commit's outcome the
// engine cannot learn (X_COMMIT_UNKNOWN), after its effects were carried out.
type failsApply struct {
	store.Store
	mu  sync.Mutex
	run string
}

func (s *failsApply) arm(run string) { s.mu.Lock(); s.run = run; s.mu.Unlock() }

func (s *failsApply) RunApply(ctx context.Context, ms []store.Mutation) ([]store.MutationResult, error) {
	s.mu.Lock()
	run := s.run
	s.mu.Unlock()
	for _, m := range ms {
		if run != "" && m.RunID == run {
			return nil, jobs.Errorf(jobs.CodeStoreUnavailable, "the store is away")
		}
	}
	return s.Store.RunApply(ctx, ms)
}

// A child start made again after a retry from a step keeps its generation's id: its resend (the
// first send's commit unknown), the same start after a plain retry of the parent (its record was
// lost, then the parent failed), and a resend of a start that landed all find the child the
// start made again created, though it was cancelled meanwhile. No third child is made.
func TestARemadeChildStartKeepsItsIdAcrossResendAndPlainRetry(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			st := &failsApply{Store: b.Open(t)}
			env := testenv.Start(t, testenv.Options{Store: st})
			ctx := t.Context()
			testenv.Declare(t, env.Engine, "w", testenv.Untyped("gp", "gq"), testenv.Untyped("gk", "gkq"))
			res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "gp", Queue: "gq", Key: "p", NoTenant: true})
			if err != nil {
				t.Fatal(err)
			}
			claim := func() frontend.Task {
				t.Helper()
				for i := 0; i < 1000; i++ {
					tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"gq"}, Max: 1})
					if err != nil {
						t.Fatal(err)
					}
					if len(tasks) == 1 {
						return tasks[0]
					}
					time.Sleep(2 * time.Millisecond)
				}
				t.Fatal("the parent was not claimed")
				return frontend.Task{}
			}
			send := func(task frontend.Task, after int64, retry bool, cs ...frontend.Command) (frontend.RecordResponse, error) {
				return env.Engine.Record(ctx, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w",
					LeaseToken: task.LeaseToken, AfterSeq: after, Retry: retry, Commands: cs})
			}
			step := frontend.Command{Kind: frontend.CmdStep, Name: "prep", Output: []byte{0x01}}
			start := func() frontend.Command {
				return frontend.Command{Kind: frontend.CmdEnqueue, Name: "kid",
					Effect: &frontend.Effect{Job: "gk", Queue: "gkq", Key: "k", NoTenant: true, Child: true}}
			}
			fail := func(task frontend.Task) frontend.Command {
				return frontend.Command{Kind: frontend.CmdFail, Attempt: task.Attempt, Code: "X_BROKEN", Error: "broken", Stop: "terminal"}
			}
			started := func(resp frontend.RecordResponse) string {
				t.Helper()
				ids := childEnqueued(t, resp.Appended)
				if len(ids) != 1 {
					t.Fatalf("the start appended %v", testenv.Kinds(resp.Appended))
				}
				return ids[0]
			}
			kids := func() int {
				all, err := env.Engine.ListRuns(ctx, store.ListParams{Job: "gk"})
				if err != nil {
					t.Fatal(err)
				}
				return len(all)
			}

			// The first life: prep, the start, then the parent fails; its child is cancelled
			// (a live child would hold the key, and the start made again would be given it).
			task := claim()
			r, err := send(task, task.LastSeq, false, step)
			if err != nil {
				t.Fatal(err)
			}
			r, err = send(task, r.LastSeq, false, start())
			if err != nil {
				t.Fatal(err)
			}
			first := started(r)
			if !uuid7.HasSeed(first, "call:"+res.RunID+"/kid") {
				t.Errorf("child %s of a run never retried is not made under call:%s/kid", first, res.RunID)
			}
			if _, err := send(task, r.LastSeq, false, fail(task)); err != nil {
				t.Fatal(err)
			}
			if _, err := env.Engine.Cancel(ctx, first, "op"); err != nil {
				t.Fatal(err)
			}

			// Retried from prep: prep again, then the start, whose commit's outcome is unknown.
			// The child it made is cancelled at once: a live one would hold the key, and a start
			// under another id would be given it too, so only the count of children tells.
			if _, err := env.Engine.Retry(ctx, engine.RetryRequest{RunID: res.RunID, FromStep: "prep", By: "op"}); err != nil {
				t.Fatal(err)
			}
			gen := lastRetrySeq(env.History(res.RunID))
			want := "call:" + res.RunID + "@" + strconv.FormatInt(gen, 10) + "/kid"
			task = claim()
			r, err = send(task, task.LastSeq, false, step)
			if err != nil {
				t.Fatal(err)
			}
			after := r.LastSeq
			st.arm(res.RunID)
			if _, err := send(task, after, false, start()); !jobs.HasCode(err, jobs.CodeCommitUnknown) {
				t.Fatalf("the start with the store away: %v; want X_COMMIT_UNKNOWN", err)
			}
			all, err := env.Engine.ListRuns(ctx, store.ListParams{Job: "gk"})
			if err != nil || len(all) != 2 {
				t.Fatalf("%d children after the start made again (%v); want 2", len(all), err)
			}
			var second string
			for _, k := range all {
				if k.ID != first {
					second = k.ID
				}
			}
			if !uuid7.HasSeed(second, want) {
				t.Fatalf("the start made again created %s; want a child made under %s", second, want)
			}
			if _, err := env.Engine.Cancel(ctx, second, "op"); err != nil {
				t.Fatal(err)
			}
			// Its resend, the store still away: the same child, not a third.
			if _, err := send(task, after, true, start()); !jobs.HasCode(err, jobs.CodeCommitUnknown) {
				t.Fatalf("the resend with the store away: %v; want X_COMMIT_UNKNOWN", err)
			}
			st.arm("")
			if n := kids(); n != 2 {
				t.Fatalf("%d children after the resend; want 2", n)
			}
			// The record is lost: the parent fails, and is retried without a step. The start,
			// made again in the same generation, finds the same child.
			if _, err := send(task, after, false, fail(task)); err != nil {
				t.Fatal(err)
			}
			if _, err := env.Engine.Retry(ctx, engine.RetryRequest{RunID: res.RunID, By: "op"}); err != nil {
				t.Fatal(err)
			}
			task = claim()
			r, err = send(task, task.LastSeq, false, start())
			if err != nil {
				t.Fatalf("the start after a plain retry: %v", err)
			}
			if got := started(r); got != second {
				t.Fatalf("after a plain retry the start names %s; want %s, made under %s", got, second, want)
			}
			if n := kids(); n != 2 {
				t.Fatalf("%d children after the plain retry; want 2", n)
			}
			// A resend of that start, which landed: answered with the same child.
			r, err = send(task, task.LastSeq, true, start())
			if err != nil {
				t.Fatalf("the resend of a start that landed: %v", err)
			}
			if got := started(r); got != second {
				t.Fatalf("the resend of a start that landed names %s; want %s", got, second)
			}
			if n := kids(); n != 2 {
				t.Fatalf("%d children after the resend of a start that landed; want 2", n)
			}
		})
	}
}

// The retry generation of a child start is the engine's fold of the parent's history, which it
// keeps for the record's checks (the run's ledger): starts after a retry from a step, attached
// and detached, are made under the generation's id, and read no history for it.
func TestAChildStartReadsNoHistoryForItsGeneration(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			st := testenv.CountHistoryReads(b.Open(t))
			env := testenv.Start(t, testenv.Options{Store: st})
			ctx := t.Context()
			testenv.Declare(t, env.Engine, "w", testenv.Untyped("rp", "rq"), testenv.Untyped("rk", "rkq"))
			res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "rp", Queue: "rq", Key: "p", NoTenant: true})
			if err != nil {
				t.Fatal(err)
			}
			claim := func() frontend.Task {
				t.Helper()
				for i := 0; i < 1000; i++ {
					tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"rq"}, Max: 1})
					if err != nil {
						t.Fatal(err)
					}
					if len(tasks) == 1 {
						return tasks[0]
					}
					time.Sleep(2 * time.Millisecond)
				}
				t.Fatal("the parent was not claimed")
				return frontend.Task{}
			}
			send := func(task frontend.Task, after int64, cs ...frontend.Command) frontend.RecordResponse {
				t.Helper()
				r, err := env.Engine.Record(ctx, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w",
					LeaseToken: task.LeaseToken, AfterSeq: after, Commands: cs})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			step := frontend.Command{Kind: frontend.CmdStep, Name: "prep", Output: []byte{0x01}}
			task := claim()
			r := send(task, task.LastSeq, step)
			send(task, r.LastSeq, frontend.Command{Kind: frontend.CmdFail, Attempt: task.Attempt, Code: "X_BROKEN", Error: "broken", Stop: "terminal"})
			if _, err := env.Engine.Retry(ctx, engine.RetryRequest{RunID: res.RunID, FromStep: "prep", By: "op"}); err != nil {
				t.Fatal(err)
			}
			task = claim()
			r = send(task, task.LastSeq, step)
			before := st.Count()
			r = send(task, r.LastSeq, frontend.Command{Kind: frontend.CmdEnqueue, Name: "kid",
				Effect: &frontend.Effect{Job: "rk", Queue: "rkq", Key: "k", NoTenant: true, Child: true}},
				frontend.Command{Kind: frontend.CmdEnqueue, Name: "detached",
					Effect: &frontend.Effect{Job: "rk", Queue: "rkq", Key: "d", NoTenant: true, Child: true, Detached: true}})
			if n := st.Count() - before; n != 0 {
				t.Errorf("the child starts read the history %d times; want none", n)
			}
			gen := lastRetrySeq(env.History(res.RunID))
			ids := childEnqueued(t, r.Appended)
			if len(ids) != 2 {
				t.Fatalf("the starts appended %v", testenv.Kinds(r.Appended))
			}
			for i, name := range []string{"kid", "detached"} {
				if want := "call:" + res.RunID + "@" + strconv.FormatInt(gen, 10) + "/" + name; !uuid7.HasSeed(ids[i], want) {
					t.Errorf("start %s made %s; want a child made under %s", name, ids[i], want)
				}
			}
		})
	}
}

// The generation a child start names is read by the engine from the run's history, not from
// what the worker sent: a resend naming a seq before the newest retry from a step (its after_seq
// is the worker's to write) still starts the child of the current generation, not the one the
// start made before that retry. Taken from after_seq, the start found the first child, its event
// matched the start the retry discarded, and the resend was answered as landed with it.
func TestAChildStartsGenerationIsNotTheWorkers(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			ctx := t.Context()
			testenv.Declare(t, env.Engine, "w", testenv.Untyped("hp", "hq"), testenv.Untyped("hk", "hkq"))
			res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "hp", Queue: "hq", Key: "p", NoTenant: true})
			if err != nil {
				t.Fatal(err)
			}
			claim := func() frontend.Task {
				t.Helper()
				for i := 0; i < 1000; i++ {
					tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"hq"}, Max: 1})
					if err != nil {
						t.Fatal(err)
					}
					if len(tasks) == 1 {
						return tasks[0]
					}
					time.Sleep(2 * time.Millisecond)
				}
				t.Fatal("the parent was not claimed")
				return frontend.Task{}
			}
			send := func(task frontend.Task, after int64, retry bool, cs ...frontend.Command) (frontend.RecordResponse, error) {
				return env.Engine.Record(ctx, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w",
					LeaseToken: task.LeaseToken, AfterSeq: after, Retry: retry, Commands: cs})
			}
			step := frontend.Command{Kind: frontend.CmdStep, Name: "prep", Output: []byte{0x01}}
			start := frontend.Command{Kind: frontend.CmdEnqueue, Name: "kid",
				Effect: &frontend.Effect{Job: "hk", Queue: "hkq", Key: "k", NoTenant: true, Child: true}}
			task := claim()
			r, err := send(task, task.LastSeq, false, step)
			if err == nil {
				r, err = send(task, r.LastSeq, false, start)
			}
			if err == nil {
				_, err = send(task, r.LastSeq, false, frontend.Command{Kind: frontend.CmdFail, Attempt: task.Attempt,
					Code: "X_BROKEN", Error: "broken", Stop: "terminal"})
			}
			if err != nil {
				t.Fatal(err)
			}
			first := childEnqueued(t, r.Appended)[0]
			if _, err := env.Engine.Cancel(ctx, first, "op"); err != nil { // frees the key
				t.Fatal(err)
			}
			if _, err := env.Engine.Retry(ctx, engine.RetryRequest{RunID: res.RunID, FromStep: "prep", By: "op"}); err != nil {
				t.Fatal(err)
			}
			task = claim()
			// A "resend" built on the history before the retry: refused, as it was built on
			// a history the run does not have, but its start was carried out first. (The
			// engine's ledger of the run is where the record before the retry left it: the
			// test reads the history from the store, which the engine's read would fold.)
			if _, err := send(task, 2, true, start); !jobs.HasCode(err, jobs.CodeHistoryStale) {
				t.Fatalf("a resend built on seq 2: %v; want X_HISTORY_STALE", err)
			}
			evs, err := env.Store.HistoryRead(ctx, res.RunID, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			gen := lastRetrySeq(evs)
			kids, err := env.Engine.ListRuns(ctx, store.ListParams{Job: "hk"})
			if err != nil || len(kids) != 2 {
				t.Fatalf("%d children (%v); want the first and one of the retry's generation", len(kids), err)
			}
			want := "call:" + res.RunID + "@" + strconv.FormatInt(gen, 10) + "/kid"
			for _, k := range kids {
				if k.ID != first && !uuid7.HasSeed(k.ID, want) {
					t.Errorf("child %s is not made under %s", k.ID, want)
				}
			}
		})
	}
}

// A publish and a plain enqueue made again after a retry from a step before them are made anew,
// as a child start is: the step and those after run again. Each takes the retry generation's id,
// so the event is published again (a new event id, delivered to a wait registered since) and the
// run is enqueued again (a new run), rather than dropped as a kept event id or answered with the
// run enqueued before. (Within a generation the ids do not change: the child start's test,
// TestARemadeChildStartKeepsItsIdAcrossResendAndPlainRetry, covers the one path all three take.)
func TestAPublishAndAnEnqueueAreMadeAnewAfterARetryFromAStep(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			ctx := t.Context()
			testenv.Declare(t, env.Engine, "w", testenv.Untyped("pp", "ppq"), testenv.Untyped("pk", "pkq"))
			res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "pp", Queue: "ppq", Key: "p", NoTenant: true})
			if err != nil {
				t.Fatal(err)
			}
			claim := func() frontend.Task {
				t.Helper()
				for i := 0; i < 1000; i++ {
					tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"ppq"}, Max: 1})
					if err != nil {
						t.Fatal(err)
					}
					if len(tasks) == 1 {
						return tasks[0]
					}
					time.Sleep(2 * time.Millisecond)
				}
				t.Fatal("the run was not claimed")
				return frontend.Task{}
			}
			payload, _ := jobs.Encode(map[string]string{"id": "o1"})
			calls := []frontend.Command{
				{Kind: frontend.CmdStep, Name: "prep", Output: []byte{0x01}},
				{Kind: frontend.CmdPublish, Name: "announce", Event: "gen.announced", Output: payload},
				{Kind: frontend.CmdEnqueue, Name: "follow", Effect: &frontend.Effect{Job: "pk", Queue: "pkq", Key: "k", NoTenant: true}},
			}
			// life runs the calls under a new claim and fails the run: the event id and run id
			// its publish and enqueue were answered.
			life := func() (eventID, runID string) {
				t.Helper()
				task := claim()
				r, err := env.Engine.Record(ctx, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w",
					LeaseToken: task.LeaseToken, AfterSeq: task.LastSeq, Commands: calls})
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range r.Appended {
					p, err := ev.Decode()
					if err != nil {
						t.Fatal(err)
					}
					switch p := p.(type) {
					case history.EventPublished:
						eventID = p.EventID
					case history.ChildEnqueued:
						runID = p.RunID
					}
				}
				if eventID == "" || runID == "" {
					t.Fatalf("the record appended %v", testenv.Kinds(r.Appended))
				}
				if _, err := env.Engine.Record(ctx, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w",
					LeaseToken: task.LeaseToken, AfterSeq: r.LastSeq, Commands: []frontend.Command{{Kind: frontend.CmdFail,
						Attempt: task.Attempt, Code: "X_BROKEN", Error: "broken", Stop: "terminal"}}}); err != nil {
					t.Fatal(err)
				}
				env.Await(res.RunID, store.StateFailed)
				return eventID, runID
			}
			enqueued := func() int {
				all, err := env.Engine.ListRuns(ctx, store.ListParams{Job: "pk"})
				if err != nil {
					t.Fatal(err)
				}
				return len(all)
			}

			ev1, run1 := life()
			if ev1 != "call:"+res.RunID+"/announce" || !uuid7.HasSeed(run1, "call:"+res.RunID+"/follow") {
				t.Errorf("a run never retried: event %q, run %s; want ids call:%s/<name>", ev1, run1, res.RunID)
			}
			if _, err := env.Engine.Cancel(ctx, run1, "op"); err != nil { // frees the key "k"
				t.Fatal(err)
			}
			if _, err := env.Engine.Retry(ctx, engine.RetryRequest{RunID: res.RunID, FromStep: "prep", By: "op"}); err != nil {
				t.Fatal(err)
			}
			gen := strconv.FormatInt(lastRetrySeq(env.History(res.RunID)), 10)
			ev2, run2 := life()
			if ev2 != "call:"+res.RunID+"@"+gen+"/announce" {
				t.Errorf("the publish made again after the retry from prep has id %q; want the generation's", ev2)
			}
			if run2 == run1 || !uuid7.HasSeed(run2, "call:"+res.RunID+"@"+gen+"/follow") || enqueued() != 2 {
				t.Errorf("the enqueue made again after the retry from prep was answered %s (first %s), %d runs; want a new run", run2, run1, enqueued())
			}
		})
	}
}
