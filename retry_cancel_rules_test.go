package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// A parent starts two children that are dead-lettered (one detached) and a third that waits,
// and waits for it. The operator cancels the parent: the cascade cancels the waiting child and
// skips the finished ones. A retry of the attached failed child is refused (X_JOB_NOT_RETRYABLE,
// naming no parent) and its body never runs again: no work a cancelled parent started runs on.
// The detached child outlives its parent's cancellation, and its retry runs.
func TestRetryRefusesAChildOfACancelledParent(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			var fixed atomic.Bool
			ran := map[string]*atomic.Int32{"attached": {}, "detached": {}}
			failing := jobs.MustDefine("rr-failkid", func(in order) string { return in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					if !fixed.Load() {
						return "", jobs.Errorf("X_BROKEN", "broken")
					}
					ran[in.ID].Add(1)
					return "charged", nil
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
			waiting := jobs.MustDefine("rr-waitkid", func(in order) string { return in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					_, _, err := jobs.WaitForEvent[order](c, "never", "rr.never", jobs.Match{"id": in.ID}, time.Hour)
					return "", err
				})
			parent := jobs.MustDefine("rr-parent", func(in order) string { return in.ID }, jobs.NoTenant[order](),
				func(c *jobs.Ctx, in order) (string, error) {
					if _, err := failing.StartChild(c, "attached", order{ID: "attached"}); err != nil {
						return "", err
					}
					if _, err := failing.StartChild(c, "detached", order{ID: "detached"}, jobs.Detached()); err != nil {
						return "", err
					}
					w, err := waiting.StartChild(c, "wait", in)
					if err != nil {
						return "", err
					}
					return w.Wait(c)
				})
			env.Worker(worker.Config{}, failing, waiting, parent)
			p := enqueue(t, env, parent, order{ID: "p1"})
			env.Await(p, store.StateSuspended)
			kids := map[string]string{}
			for i := 0; i < 2000 && len(kids) < 2; i++ {
				rs, _ := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "rr-failkid", State: store.StateFailed})
				for _, r := range rs {
					kids[r.Key] = r.ID
				}
				time.Sleep(5 * time.Millisecond)
			}
			if len(kids) < 2 {
				t.Fatalf("failed children %v", kids)
			}
			if _, err := env.Engine.Cancel(t.Context(), p, "order withdrawn"); err != nil {
				t.Fatal(err)
			}
			fixed.Store(true)
			_, err := env.Engine.Retry(t.Context(), engine.RetryRequest{RunID: kids["attached"], By: "op", Reason: "retry all"})
			if !jobs.HasCode(err, jobs.CodeJobNotRetryable) {
				t.Fatalf("retry of the attached child of a cancelled parent: %v, want X_JOB_NOT_RETRYABLE", err)
			}
			if strings.Contains(err.Error(), p) {
				t.Errorf("the refusal names the parent %s (possibly another tenant's): %q", p, err.Error())
			}
			if r, _ := env.Engine.GetRun(t.Context(), kids["attached"]); r.State != store.StateFailed {
				t.Errorf("the refused retry left the child %s", r.State)
			}
			if _, err := env.Engine.Retry(t.Context(), engine.RetryRequest{RunID: kids["detached"], By: "op"}); err != nil {
				t.Fatalf("retry of the detached child: %v", err)
			}
			env.Await(kids["detached"], store.StateCompleted)
			time.Sleep(100 * time.Millisecond)
			if n := ran["attached"].Load(); n != 0 {
				t.Errorf("the attached child of a cancelled parent ran %d times after the retry", n)
			}
			if n := ran["detached"].Load(); n != 1 {
				t.Errorf("the detached child ran %d times after its retry, want 1", n)
			}
		})
	}
}

// movesBeforeRetry runs before (once) just before the store's RunRetry: another operator's
// retry, and its pass, landing between Engine.Retry's history read and its reopening.
type movesBeforeRetry struct {
	store.Store
	before atomic.Pointer[func()]
	calls  atomic.Int32
}

func (s *movesBeforeRetry) RunRetry(ctx context.Context, p store.RetryParams) (store.Run, error) {
	s.calls.Add(1)
	if f := s.before.Swap(nil); f != nil {
		(*f)()
	}
	return s.Store.RunRetry(ctx, p)
}

// Operator 2 retries a dead run from step "b" while operator 1's retry from "a" lands (and its
// pass runs a and b again and fails) between operator 2's history read and its reopening. The
// store refuses the reopening built on the old history (X_HISTORY_STALE), and Engine.Retry finds
// b again in the history as it now is: the retry from b re-runs b and not a, and its RunRetried
// points at the b of op1's pass.
func TestRetryFromStepIsBuiltOnTheCurrentHistory(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			st := &movesBeforeRetry{Store: b.Open(t)}
			env := testenv.Start(t, testenv.Options{Store: st})
			var aRuns, bRuns atomic.Int32
			j := jobs.MustDefine("rr-ab", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
				func(c *jobs.Ctx, in int) (int, error) {
					if _, err := jobs.Step(c, "a", func(context.Context) (int, error) { return int(aRuns.Add(1)), nil }); err != nil {
						return 0, err
					}
					if _, err := jobs.Step(c, "b", func(context.Context) (int, error) { return int(bRuns.Add(1)), nil }); err != nil {
						return 0, err
					}
					return 0, jobs.Errorf("X_DOWNSTREAM", "downstream refused")
				}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
			env.Worker(worker.Config{}, j)
			id := enqueue(t, env, j, 1)
			env.Await(id, store.StateFailed)
			failures := func() int { return countKind(env, id, string(history.KindRunFailed)) }
			other := func() {
				if _, err := env.Engine.Retry(t.Context(), engine.RetryRequest{RunID: id, FromStep: "a", By: "op1"}); err != nil {
					t.Error(err)
					return
				}
				for failures() < 2 {
					time.Sleep(2 * time.Millisecond)
				}
			}
			st.before.Store(&other)
			if _, err := env.Engine.Retry(t.Context(), engine.RetryRequest{RunID: id, FromStep: "b", By: "op2"}); err != nil {
				t.Fatalf("op2's retry: %v", err)
			}
			for failures() < 3 {
				time.Sleep(2 * time.Millisecond)
			}
			if a, b := aRuns.Load(), bRuns.Load(); a != 2 || b != 3 {
				t.Errorf("a ran %d times, b %d; want 2 and 3 (op2's retry from b re-runs b only)", a, b)
			}
			// op2's RunRetried names the b op1's pass recorded, the newest.
			var lastB, op2From int64
			for _, ev := range env.History(id) {
				switch {
				case ev.Kind == history.KindStepCompleted && ev.Name == "b" && op2From == 0:
					lastB = ev.Seq
				case ev.Kind == history.KindRunRetried:
					p, err := ev.Decode()
					if err != nil {
						t.Fatal(err)
					}
					if r := p.(history.RunRetried); r.By == "op2" {
						op2From = r.FromSeq
					}
				}
			}
			if op2From == 0 || op2From != lastB {
				t.Errorf("op2's retry from b has FromSeq %d; the b it should name is at seq %d (history %v)",
					op2From, lastB, testenv.Kinds(env.History(id)))
			}
		})
	}
}

// A cancel's reason and a retry's by, reason and step are kept in the run's history and shown
// wherever the run is: Engine.Cancel and Engine.Retry refuse (X_BAD_REQUEST) what the console
// and the clients refuse, at most 1,000 bytes of UTF-8 without NUL, so a Go caller, the HTTP
// API and the console keep the same. A refused call changes nothing.
func TestCancelAndRetryTextIsTheEnginesRule(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	j := jobs.MustDefine("rr-idle", func(in int) string { return fmt.Sprint(in) }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, in int) (int, error) { return 0, jobs.Errorf("X_NOPE", "nope") },
		jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
	env.Worker(worker.Config{}, j)
	failed := enqueue(t, env, j, 1)
	env.Await(failed, store.StateFailed)
	res, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "rr-idle", Key: "idle", NoTenant: true, Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	idle := res.RunID
	bad := map[string]string{"NUL": "a\x00b", "invalid UTF-8": "a\xffb", "1,001 bytes": strings.Repeat("r", 1001)}
	for what, v := range bad {
		_, err := env.Engine.Cancel(t.Context(), idle, v)
		if !jobs.HasCode(err, jobs.CodeBadRequest) {
			t.Errorf("cancel with a reason of %s: %v, want X_BAD_REQUEST", what, err)
		}
		for field, req := range map[string]engine.RetryRequest{
			"by":       {RunID: failed, By: v},
			"reason":   {RunID: failed, Reason: v},
			"fromStep": {RunID: failed, FromStep: v},
		} {
			if _, err := env.Engine.Retry(t.Context(), req); !jobs.HasCode(err, jobs.CodeBadRequest) {
				t.Errorf("retry with a %s of %s: %v, want X_BAD_REQUEST", field, what, err)
			}
		}
	}
	if r, _ := env.Engine.GetRun(t.Context(), idle); r.State != store.StateDelayed {
		t.Errorf("refused cancels left the run %s", r.State)
	}
	if r, _ := env.Engine.GetRun(t.Context(), failed); r.State != store.StateFailed {
		t.Errorf("refused retries left the run %s", r.State)
	}
	limit := strings.Repeat("é", 500) // 1,000 bytes
	if _, err := env.Engine.Retry(t.Context(), engine.RetryRequest{RunID: failed, By: limit, Reason: limit}); err != nil {
		t.Errorf("retry with a by and reason of 1,000 bytes: %v", err)
	}
	if _, err := env.Engine.Cancel(t.Context(), idle, limit); err != nil {
		t.Errorf("cancel with a reason of 1,000 bytes: %v", err)
	}
}
