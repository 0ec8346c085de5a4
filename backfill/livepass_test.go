package backfill_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// One live pass per (name, tenant), whatever key the run was enqueued under. The backfill's own
// key makes a second enqueue the live pass, but a schedule's run is keyed schedule@occurrence, a
// manual trigger's @manual@, and the CLI takes --key: each started a second pass beside the live
// one, which opened a second running row and swept page 0 again. BackfillOpen now refuses such a
// pass (X_BACKFILL_LIVE, terminal, naming the live pass) before it writes a row; and a
// schedule of the backfill still starts a pass whenever none is live.
func TestOneLivePassPerBackfillWhateverTheKey(t *testing.T) {
	t.Parallel()
	// A short lease: the cancelled passes' pauses end at their next heartbeat.
	testenv.EachBackend(t, testenv.Options{Clock: clock.Real{}, Lease: 300 * time.Millisecond}, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		tb := newTable(5)
		b := backfill.MustDefine("one-live-pass", backfill.AllTenants(), tb.source(), tb.handle,
			backfill.BatchSize(1), backfill.Rate(0.001)) // a page every 1,000 s: a pass stays live
		startWorker(env, "", b)
		nightly := scheduler.MustDefine("nightly-resweep", b, "0 3 * * *", "UTC", backfill.Input{})
		sc, err := scheduler.New(scheduler.Config{Engine: env.Engine, ID: "s1", Schedules: scheduler.Static(nightly), Logger: env.Logger})
		if err != nil {
			t.Fatal(err)
		}
		a := enqueue(t, env, b, backfill.Input{})
		defer func() { _, _ = env.Engine.Cancel(ctx, a.RunID, "test over") }()
		eventually(t, "pass A's first page", func() bool { return len(stepNames(env, a.RunID)) == 1 }, nil)

		in, err := jobs.Encode(backfill.Input{})
		if err != nil {
			t.Fatal(err)
		}
		manual, err := sc.Trigger(ctx, "nightly-resweep")
		if err != nil {
			t.Fatal(err)
		}
		occurrence, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: b.Name(), Input: in, NoTenant: true,
			Key: scheduler.OccurrenceKey("nightly-resweep", time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC))})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{manual.RunID, occurrence.RunID} {
			if id == a.RunID {
				t.Fatalf("an enqueue under another key returned the live pass: the check is not needed")
			}
			run := env.Await(id, store.StateCompleted, store.StateFailed)
			if run.State != store.StateFailed || run.ErrorCode != string(jobs.CodeBackfillLive) || !strings.Contains(run.Error, a.RunID) ||
				run.Attempt != 1 {
				t.Fatalf("a second pass (key %s) ended %s (attempt %d) %s %s; want refused at once with X_BACKFILL_LIVE naming %s",
					run.Key, run.State, run.Attempt, run.ErrorCode, run.Error, a.RunID)
			}
			if n := len(stepNames(env, id)); n != 0 {
				t.Fatalf("the refused pass recorded %d pages", n)
			}
		}
		rows := ledger(t, env, b.Name())
		if len(rows) != 1 || rows[0].RunID != a.RunID || rows[0].Status != backfill.StatusRunning {
			t.Fatalf("ledger = %+v; want pass A's row alone, running", rows)
		}
		if n := tb.pageCalls(0); n != 1 {
			t.Fatalf("page 0 handled %d times; want once", n)
		}

		// With no pass live, the schedule starts one: a key that is not the backfill's is no
		// reason to refuse.
		if _, err := env.Engine.Cancel(ctx, a.RunID, "make way"); err != nil {
			t.Fatal(err)
		}
		next, err := sc.Trigger(ctx, "nightly-resweep")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = env.Engine.Cancel(ctx, next.RunID, "test over") }()
		eventually(t, "the scheduled pass's first page", func() bool { return len(stepNames(env, next.RunID)) == 1 }, nil)
		if rows := ledger(t, env, b.Name()); len(rows) != 2 || rows[0].RunID != next.RunID || rows[0].Status != backfill.StatusRunning {
			t.Fatalf("ledger = %+v; want the scheduled pass running, newest", rows)
		}
	})
}

// Per tenant: another tenant's live pass is no reason to refuse one; the same tenant's is.
func TestOneLivePassPerTenant(t *testing.T) {
	t.Parallel()
	// A short lease: the cancelled passes' pauses end at their next heartbeat.
	testenv.EachBackend(t, testenv.Options{Clock: clock.Real{}, Lease: 300 * time.Millisecond}, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		tb := newTable(6)
		b := backfill.MustDefine("one-live-pass-per-tenant", backfill.PerTenant(), tb.source(), tb.handle,
			backfill.BatchSize(1), backfill.Rate(0.001))
		startWorker(env, "", b)
		a := enqueue(t, env, b, backfill.Input{Tenant: "org-0"})
		c := enqueue(t, env, b, backfill.Input{Tenant: "org-1"})
		defer func() {
			for _, id := range []string{a.RunID, c.RunID} {
				_, _ = env.Engine.Cancel(ctx, id, "test over")
			}
		}()
		for _, id := range []string{a.RunID, c.RunID} {
			eventually(t, "each tenant's first page", func() bool { return len(stepNames(env, id)) == 1 }, nil)
		}
		in, err := jobs.Encode(backfill.Input{Tenant: "org-0"})
		if err != nil {
			t.Fatal(err)
		}
		second, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: b.Name(), Input: in, Tenant: "org-0", Key: "by-hand"})
		if err != nil {
			t.Fatal(err)
		}
		run := env.Await(second.RunID, store.StateCompleted, store.StateFailed)
		if run.ErrorCode != string(jobs.CodeBackfillLive) || !strings.Contains(run.Error, a.RunID) || !strings.Contains(run.Error, `"org-0"`) {
			t.Fatalf("a second pass of org-0: %s %s %s; want X_BACKFILL_LIVE naming %s and the tenant", run.State, run.ErrorCode, run.Error, a.RunID)
		}
	})
}

// An attempt that failed leaves its row failed while its run waits for the retry: that pass is
// still live, and a pass opening then is refused, so the retry does not find a second pass
// sweeping beside it.
func TestAPassWaitingForItsRetryIsLive(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	ctx := context.Background()
	tb := newTable(1)
	b := backfill.MustDefine("retry-waits", backfill.AllTenants(), tb.source(), tb.handle)
	testenv.Declare(t, env.Engine, "w", b)
	claim := func(want string) frontend.Claim {
		t.Helper()
		tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"default"}, Max: 1, Wait: time.Second})
		if err != nil || len(tasks) != 1 || tasks[0].RunID != want {
			t.Fatalf("poll: %v, %+v; want run %s", err, tasks, want)
		}
		return frontend.Claim{RunID: tasks[0].RunID, Fence: tasks[0].Fence, WorkerID: "w", LeaseToken: tasks[0].LeaseToken}
	}
	open := func(c frontend.Claim) error {
		_, err := env.Engine.BackfillOpen(ctx, frontend.BackfillOpenRequest{Claim: c, Name: b.Name(), Checksum: "sum", Total: -1})
		return err
	}
	a := enqueue(t, env, b, backfill.Input{})
	ca := claim(a.RunID)
	if err := open(ca); err != nil {
		t.Fatal(err)
	}
	if err := env.Engine.BackfillReport(ctx, frontend.BackfillReportRequest{Claim: ca, Status: store.BackfillFailed, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	// The run itself is still claimed (its attempt has not been recorded failed): live.
	in, err := jobs.Encode(backfill.Input{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: b.Name(), Input: in, NoTenant: true, Key: "by-hand"})
	if err != nil {
		t.Fatal(err)
	}
	if err := open(claim(other.RunID)); !jobs.HasCode(err, jobs.CodeBackfillLive) {
		t.Fatalf("open beside a pass whose row is failed and whose run is live: %v; want X_BACKFILL_LIVE", err)
	}
	if rows := ledger(t, env, b.Name()); len(rows) != 1 || rows[0].RunID != a.RunID {
		t.Fatalf("the refused open wrote a row: %+v", rows)
	}
	// Its own retry adopts its row as before.
	if err := open(ca); err != nil {
		t.Fatalf("the live pass reopening its own row: %v", err)
	}
}

// A worker reaching the engine over HTTP gets the same refusal, with its code, and fails the run
// rather than sweeping without a row (what it does on the ledger's other refusals).
func TestASecondPassOverTheAPIIsRefused(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}, Lease: 300 * time.Millisecond})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Drain()
	c, err := api.NewClient(hs.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	tb := newTable(3)
	b := backfill.MustDefine("one-live-pass-remote", backfill.AllTenants(), tb.source(), tb.handle,
		backfill.BatchSize(1), backfill.Rate(0.001))
	w := env.Worker(workerConfig(c), b)
	defer func() { _ = w.Stop(context.Background()) }()
	a := enqueue(t, env, b, backfill.Input{})
	defer func() { _, _ = env.Engine.Cancel(ctx, a.RunID, "test over") }()
	eventually(t, "pass A's first page", func() bool { return len(stepNames(env, a.RunID)) == 1 }, nil)
	in, err := jobs.Encode(backfill.Input{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: b.Name(), Input: in, NoTenant: true, Key: "by-hand"})
	if err != nil {
		t.Fatal(err)
	}
	run := env.Await(second.RunID, store.StateCompleted, store.StateFailed)
	if run.ErrorCode != string(jobs.CodeBackfillLive) || len(stepNames(env, second.RunID)) != 0 || tb.pageCalls(0) != 1 {
		t.Fatalf("a second pass over the API: %s %s %s, %d pages; want refused with X_BACKFILL_LIVE before any page",
			run.State, run.ErrorCode, run.Error, len(stepNames(env, second.RunID)))
	}
}

// Two passes opening at the same moment may both find none live: each looks again once its row
// is in, and the one that then finds the other's gives way, its row saying why.
func TestTwoPassesOpeningAtOnceLeaveOneLive(t *testing.T) {
	t.Parallel()
	st := &rivalStore{Store: memory.New()}
	env := testenv.Start(t, testenv.Options{Store: st, Clock: clock.Real{}})
	ctx := context.Background()
	tb := newTable(1)
	b := backfill.MustDefine("opened-at-once", backfill.AllTenants(), tb.source(), tb.handle)
	testenv.Declare(t, env.Engine, "w", b)
	in, err := jobs.Encode(backfill.Input{})
	if err != nil {
		t.Fatal(err)
	}
	var claims []frontend.Claim
	for _, key := range []string{b.Name(), "by-hand"} {
		if _, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: b.Name(), Input: in, NoTenant: true, Key: key}); err != nil {
			t.Fatal(err)
		}
		tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"default"}, Max: 1, Wait: time.Second})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("poll: %v, %d tasks", err, len(tasks))
		}
		claims = append(claims, frontend.Claim{RunID: tasks[0].RunID, Fence: tasks[0].Fence, WorkerID: "w", LeaseToken: tasks[0].LeaseToken})
	}
	first, second := claims[0], claims[1]
	// The first pass's row lands between the second's check and its insert.
	st.before = func() {
		st.before = nil
		if _, err := env.Engine.BackfillOpen(ctx, frontend.BackfillOpenRequest{Claim: first, Name: b.Name(), Checksum: "sum", Total: -1}); err != nil {
			t.Errorf("the first pass's open: %v", err)
		}
	}
	_, err = env.Engine.BackfillOpen(ctx, frontend.BackfillOpenRequest{Claim: second, Name: b.Name(), Checksum: "sum", Total: -1})
	if !jobs.HasCode(err, jobs.CodeBackfillLive) || !strings.Contains(err.Error(), first.RunID) {
		t.Fatalf("the later of two passes opening at once: %v; want X_BACKFILL_LIVE naming %s", err, first.RunID)
	}
	rows, err := env.Engine.InspectBackfills(ctx, store.BackfillFilter{Name: b.Name()})
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]backfill.Progress{}
	for _, r := range rows {
		status[r.RunID] = r
	}
	if status[first.RunID].Status != backfill.StatusRunning || status[second.RunID].Status != backfill.StatusFailed ||
		!strings.Contains(status[second.RunID].Error, string(jobs.CodeBackfillLive)) {
		t.Fatalf("rows = %+v; want the first running and the second failed with the refusal", rows)
	}
}

// rivalStore runs before (once) as a pass's row is about to be inserted: another pass opening in
// that moment.
type rivalStore struct {
	store.Store
	before func()
}

func (s *rivalStore) BackfillOpen(ctx context.Context, b store.Backfill) (store.Backfill, bool, error) {
	if f := s.before; f != nil {
		f()
	}
	return s.Store.BackfillOpen(ctx, b)
}
