package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// heldApply holds the first group commit naming run (once armed) until released.
type heldApply struct {
	store.Store
	mu      sync.Mutex
	run     string
	entered chan struct{}
	release chan struct{}
}

func (g *heldApply) arm(run string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.run, g.entered, g.release = run, make(chan struct{}), make(chan struct{})
}

func (g *heldApply) RunApply(ctx context.Context, ms []store.Mutation) ([]store.MutationResult, error) {
	g.mu.Lock()
	var entered, release chan struct{}
	for _, m := range ms {
		if g.run != "" && m.RunID == g.run {
			entered, release, g.run = g.entered, g.release, ""
		}
	}
	g.mu.Unlock()
	if entered != nil {
		close(entered)
		<-release
	}
	return g.Store.RunApply(ctx, ms)
}

// How a record's answer goes astray before its worker's resend (Retry, same AfterSeq).
const (
	// The worker's connection drops while the record commits (its ctx ends: X_COMMIT_UNKNOWN);
	// the commit then lands, and the resend finds it landed.
	lostMidCommit = "answer-lost-mid-commit"
	// The record commits and is answered, and the answer is lost on its way to the worker.
	lostAfterAnswer = "answer-lost-after-it-was-sent"
	// As lostMidCommit, with the resend already queued behind the first send when it lands.
	resendRacesFirst = "resend-racing-its-first-send"
)

// sendLosingTheAnswer sends req as the worker does, losing the answer as how says, then resends it
// and returns the resend's answer.
func sendLosingTheAnswer(t *testing.T, env *testenv.Env, g *heldApply, how string, req frontend.RecordRequest) frontend.RecordResponse {
	t.Helper()
	ctx := t.Context()
	if how == lostAfterAnswer {
		if _, err := env.Engine.Record(ctx, req); err != nil {
			t.Fatalf("the first send: %v", err)
		}
	} else {
		g.arm(req.RunID)
		cctx, cancel := context.WithCancel(ctx)
		first := make(chan error, 1)
		go func() { _, err := env.Engine.Record(cctx, req); first <- err }()
		<-g.entered
		cancel() // the worker's connection drops while its record commits
		if err := <-first; !jobs.HasCode(err, jobs.CodeCommitUnknown) {
			t.Fatalf("the first send: %v; want %s", err, jobs.CodeCommitUnknown)
		}
	}
	req.Retry = true
	if how == resendRacesFirst {
		second := make(chan struct{})
		var resp frontend.RecordResponse
		var err error
		go func() {
			defer close(second)
			resp, err = env.Engine.Record(ctx, req)
		}()
		time.Sleep(50 * time.Millisecond) // the resend looks for its events, finds none, and queues
		close(g.release)
		<-second
		if err != nil {
			t.Fatalf("the resend: %v", err)
		}
		return resp
	}
	if how == lostMidCommit {
		close(g.release) // the first send's commit lands
		deadline := time.Now().Add(10 * time.Second)
		for {
			if run, err := env.Engine.GetRun(ctx, req.RunID); err == nil && (run.LastSeq > req.AfterSeq || run.State != store.StateRunning) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the first send's commit did not land")
			}
			time.Sleep(time.Millisecond)
		}
	}
	resp, err := env.Engine.Record(ctx, req)
	if err != nil {
		t.Fatalf("the resend: %v", err)
	}
	return resp
}

func histogramCount(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) uint64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; ok && v != l.GetValue() {
					continue series
				}
			}
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// A record that landed has its post-commit work done once, at its commit, whether its answer
// reached the worker or was lost and only its resend was answered: the run is counted once in
// jobs_total{source="engine"} and jobs_run_duration_seconds, logged once, and its fleet slot is
// free at once for the next run of its capped job. The resend found the record landed and was
// answered before any of that work (landedAnswer returned before it), so a run confirmed only to
// its resend was never counted, logged, or freed of its slot (the next run waited a lease).
func TestALandedRecordIsCountedOnceWhetherItsAnswerWasLostOrNot(t *testing.T) {
	t.Parallel()
	for _, how := range []string{lostMidCommit, lostAfterAnswer, resendRacesFirst} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			g := &heldApply{Store: memory.New()}
			var logs testenv.LogBuffer
			env := testenv.Start(t, testenv.Options{Store: g, Logger: logs.Logger(), LogRuns: true})
			reg := prometheus.NewRegistry()
			reg.MustRegister(env.Engine.Collectors()...)
			ctx := t.Context()
			capped := jobs.MustDefine("capped", func(k string) string { return k }, jobs.NoTenant[string](),
				func(*jobs.Ctx, string) (int, error) { return 0, nil }, jobs.Queue("q"), jobs.Concurrency(1))
			testenv.Declare(t, env.Engine, "w", capped)
			for _, k := range []string{"a", "b"} {
				if _, err := capped.Enqueue(ctx, env.Engine, k); err != nil {
					t.Fatal(err)
				}
			}
			poll := func() []frontend.Task {
				t.Helper()
				// One at a time: a claim over the cap is handed back, to wait for its retry.
				tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 1})
				if err != nil {
					t.Fatal(err)
				}
				return tasks
			}
			tasks := poll()
			if len(tasks) != 1 {
				t.Fatalf("first claim of a job capped at 1: %d tasks", len(tasks))
			}
			task := tasks[0]
			out, _ := jobs.Encode(0)
			resp := sendLosingTheAnswer(t, env, g, how, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w",
				LeaseToken: task.LeaseToken, AfterSeq: task.LastSeq, Commands: []frontend.Command{{Kind: frontend.CmdComplete, Output: out}}})
			if resp.State != string(store.StateCompleted) {
				t.Fatalf("the resend's answer names state %q, want completed", resp.State)
			}
			// The resend's answer follows the first send's post-commit work: nothing is waited for.
			if n := testenv.Counter(t, reg, jobs.MetricJobsTotal, map[string]string{"source": "engine", "queue": "q", "outcome": "completed"}); n != 1 {
				t.Errorf(`jobs_total{source="engine",outcome="completed"} = %v for one run completed, want 1`, n)
			}
			if n := histogramCount(t, reg, "jobs_run_duration_seconds", map[string]string{"queue": "q", "outcome": "completed"}); n != 1 {
				t.Errorf("jobs_run_duration_seconds observed %d runs completed, want 1", n)
			}
			if n := strings.Count(logs.String(), "jobs.run.finished"); n != 1 {
				t.Errorf("%d jobs.run.finished lines for one run, want 1:\n%s", n, logs.String())
			}
			if next := poll(); len(next) != 1 {
				t.Errorf("the next run of the capped job: %d tasks, want 1 (the completed run's slot was not released)", len(next))
			}
			// A second resend is answered the same and counts nothing more.
			req := frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w", LeaseToken: task.LeaseToken,
				AfterSeq: task.LastSeq, Commands: []frontend.Command{{Kind: frontend.CmdComplete, Output: out}}, Retry: true}
			if _, err := env.Engine.Record(ctx, req); err != nil {
				t.Fatalf("a second resend: %v", err)
			}
			if n := testenv.Counter(t, reg, jobs.MetricJobsTotal, map[string]string{"source": "engine", "outcome": "completed"}); n != 1 {
				t.Errorf(`jobs_total{source="engine",outcome="completed"} = %v after a second resend, want 1`, n)
			}
		})
	}
}

// A hand-back whose answer was lost mid-commit is counted once in
// jobs_claims_handed_back_total{source="engine"}, by the commit, not by the resend, and the run
// is claimable again at once (the pollers are woken).
func TestAHandBackAnsweredToItsResendIsCountedOnce(t *testing.T) {
	t.Parallel()
	for _, how := range []string{lostMidCommit, lostAfterAnswer} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			g := &heldApply{Store: memory.New()}
			env := testenv.Start(t, testenv.Options{Store: g})
			reg := prometheus.NewRegistry()
			reg.MustRegister(env.Engine.Collectors()...)
			ctx := t.Context()
			testenv.Declare(t, env.Engine, "w", testenv.Untyped("j", "q"))
			if _, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Queue: "q", Key: "k", NoTenant: true}); err != nil {
				t.Fatal(err)
			}
			tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 1})
			if err != nil || len(tasks) != 1 {
				t.Fatalf("poll: %d tasks, %v", len(tasks), err)
			}
			task := tasks[0]
			sendLosingTheAnswer(t, env, g, how, frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w",
				LeaseToken: task.LeaseToken, AfterSeq: task.LastSeq, Commands: []frontend.Command{{Kind: frontend.CmdRelease,
					ReadyAt: env.Clock.Now(), Code: "tenant_cap", Error: "the tenant is at its cap"}}})
			if n := testenv.Counter(t, reg, jobs.MetricClaimsHandedBack, map[string]string{"source": "engine", "reason": "tenant_cap"}); n != 1 {
				t.Errorf(`jobs_claims_handed_back_total{source="engine",reason="tenant_cap"} = %v for one hand-back, want 1`, n)
			}
			if again, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 1}); err != nil || len(again) != 1 {
				t.Errorf("the handed-back run claimed again: %d tasks, %v; want 1", len(again), err)
			}
		})
	}
}
