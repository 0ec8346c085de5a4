package outbox

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// The run exists if and only if the caller's transaction commits.
func TestCommitAndRollback(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, env *testenv.Env) {
		ob := newOutbox(t, b, env, Required)
		stage(t, b, ob, "committed")

		tx, _, rollback := b.begin(t)
		if _, err := noteJob.EnqueueTx(t.Context(), ob.Tx(tx), Note{ID: "rolled-back"}); err != nil {
			t.Fatal(err)
		}
		if err := rollback(); err != nil {
			t.Fatal(err)
		}
		if n, _, _ := b.outbox.Backlog(t.Context()); n != 1 {
			t.Fatalf("backlog %d after one commit and one rollback, want 1", n)
		}
		r := newRelay(t, b, env, env.Engine, "r1", 0)
		if n := pass(t, r); n != 1 {
			t.Fatalf("published %d rows, want 1", n)
		}
		runs := runsOf(t, env)
		if len(runs) != 1 || len(runs["note:committed"]) != 1 {
			t.Fatalf("runs %v, want exactly the committed one", runs)
		}
		if n := pass(t, r); n != 0 {
			t.Errorf("a second pass published %d rows, want 0", n)
		}
		// The memory store drops a published row; the SQL stores keep it with published_at.
		backlog, _, _ := b.outbox.Backlog(t.Context())
		if backlog != 0 {
			t.Errorf("backlog %d after the pass, want 0", backlog)
		}
		if got := b.published(t); b.name == "memory" {
			if len(b.outbox.(*MemoryStore).rows) != 0 {
				t.Error("the memory store kept a published row")
			}
		} else if got != 1 {
			t.Errorf("%d rows carry published_at, want 1", got)
		}
	})
}

// Two relays racing over one backlog: every row is published exactly once.
func TestTwoRelaysRacing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, env *testenv.Env) {
		ob := newOutbox(t, b, env, Required)
		var ids []string
		for i := range 30 {
			ids = append(ids, sprint(i))
		}
		stage(t, b, ob, ids...)
		rec := &recorder{next: env.Engine}
		relays := []*Relay{newRelay(t, b, env, rec, "a", 4), newRelay(t, b, env, rec, "b", 4)}
		var wg sync.WaitGroup
		for _, r := range relays {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 200 {
					if _, err := r.Pass(context.Background()); err != nil {
						t.Errorf("relay %s: %v", r.ID(), err)
						return
					}
					if n, _, _ := b.outbox.Backlog(context.Background()); n == 0 {
						return
					}
				}
			}()
		}
		wg.Wait()
		got := rec.published()
		slices.Sort(got)
		want := keys(ids...)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("published %v\nwant each once %v", got, want)
		}
		for k, rs := range runsOf(t, env) {
			if len(rs) != 1 {
				t.Errorf("%s has %d runs", k, len(rs))
			}
		}
	})
}

// A relay that stalled past its lease owns nothing: its late mark and release change nothing.
func TestStalledRelayPastItsLease(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, env *testenv.Env) {
		ob := newOutbox(t, b, env, Required)
		rows := stage(t, b, ob, "x", "y")
		now := env.Clock.Now()
		stalled, err := b.outbox.Claim(t.Context(), "stalled", now, DefaultLease, 10)
		if err != nil || len(stalled) != 2 {
			t.Fatalf("claim: %d rows, %v", len(stalled), err)
		}
		// Inside the lease nobody else gets them.
		if got, _ := b.outbox.Claim(t.Context(), "other", now.Add(DefaultLease/2), DefaultLease, 10); len(got) != 0 {
			t.Fatalf("a second relay claimed %d held rows inside the lease", len(got))
		}
		later := now.Add(DefaultLease + time.Second)
		taken, err := b.outbox.Claim(t.Context(), "taker", later, DefaultLease, 10)
		if err != nil || len(taken) != 2 {
			t.Fatalf("takeover after the lease: %d rows, %v", len(taken), err)
		}
		// The stalled relay wakes up: its release must not unclaim the taker's rows (a third
		// relay would republish them) and its mark must not retire rows nobody published.
		if n, err := b.outbox.Release(t.Context(), "stalled", rows); err != nil || n != 0 {
			t.Errorf("late release matched %d rows (%v), want 0", n, err)
		}
		if n, err := b.outbox.MarkPublished(t.Context(), "stalled", rows, later); err != nil || n != 0 {
			t.Errorf("late mark matched %d rows (%v), want 0", n, err)
		}
		if got, _ := b.outbox.Claim(t.Context(), "third", later, DefaultLease, 10); len(got) != 0 {
			t.Errorf("a third relay claimed %d rows the taker holds", len(got))
		}
		if n, _, _ := b.outbox.Backlog(t.Context()); n != 2 {
			t.Errorf("backlog %d, want the 2 rows still unpublished", n)
		}
		if n, err := b.outbox.MarkPublished(t.Context(), "taker", rows, later); err != nil || n != 2 {
			t.Errorf("the taker's mark matched %d (%v), want 2", n, err)
		}
	})
}

// A relay killed mid-batch: its rows wait out the lease, then another relay publishes them all,
// and the one it had published is not run twice.
func TestRelayKilledMidBatch(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, env *testenv.Env) {
		ob := newOutbox(t, b, env, Required)
		stage(t, b, ob, "1", "2", "3")
		rec := &recorder{next: env.Engine}
		dying := newRelay(t, b, env, rec, "dying", 10)
		dying.afterPublish = func(i int) bool { return i < 0 } // dies after the first publish
		if n := pass(t, dying); n != 1 {
			t.Fatalf("the dying relay published %d, want 1", n)
		}
		heir := newRelay(t, b, env, rec, "heir", 10)
		if n := pass(t, heir); n != 0 {
			t.Fatalf("inside the lease the heir published %d rows, want 0", n)
		}
		env.Fake().Advance(DefaultLease + time.Second)
		if n := pass(t, heir); n != 3 {
			t.Fatalf("after the lease the heir published %d rows, want 3", n)
		}
		if got, want := rec.published(), keys("1", "1", "2", "3"); !slices.Equal(got, want) {
			t.Errorf("publishes %v, want %v", got, want)
		}
		if rec.res[0].RunID != rec.res[1].RunID || !rec.res[1].Deduped {
			t.Errorf("the republished row got %+v, the first publish %+v: want the same run, deduped", rec.res[1], rec.res[0])
		}
		for k, rs := range runsOf(t, env) {
			if len(rs) != 1 {
				t.Errorf("%s has %d runs", k, len(rs))
			}
		}
	})
}

// Rows go out in (staged_at, id) order: B, staged after A in the same transaction, is never
// enqueued before A, not when A's publish fails, not with a second relay.
func TestOrdering(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, env *testenv.Env) {
		ob := newOutbox(t, b, env, Required)
		var ids []string
		for i := range 12 {
			ids = append(ids, sprint(100+i)) // 100..111: text order is stage order
		}
		stage(t, b, ob, ids...)
		rec := &recorder{next: env.Engine, fail: map[string]int{"note:100": 1}}
		r1 := newRelay(t, b, env, rec, "r1", 5)
		if n, err := r1.Pass(t.Context()); err == nil || n != 0 {
			t.Fatalf("a pass whose first publish failed: %d, %v; want 0 and the error", n, err)
		}
		if len(rec.published()) != 0 {
			t.Fatalf("rows overtook the failed one: %v", rec.published())
		}
		// The rest of the batch was handed back at once: no lease wait.
		if n := pass(t, r1); n != 5 {
			t.Fatalf("the next pass published %d, want 5", n)
		}
		// r1 now holds the next batch of 5 (claimed, not yet published): r2 gets nothing.
		held, err := b.outbox.Claim(t.Context(), "r1", env.Clock.Now(), DefaultLease, 5)
		if err != nil || len(held) != 5 {
			t.Fatalf("claim: %d, %v", len(held), err)
		}
		r2 := newRelay(t, b, env, rec, "r2", 5)
		if n := pass(t, r2); n != 0 {
			t.Fatalf("r2 published %d rows behind rows r1 holds", n)
		}
		if _, err := b.outbox.Release(t.Context(), "r1", rowIDs(held)); err != nil {
			t.Fatal(err)
		}
		for pass(t, r2) > 0 {
		}
		if got, want := rec.published(), keys(ids...); !slices.Equal(got, want) {
			t.Errorf("publish order %v\nwant %v", got, want)
		}
	})
}

// Rows staged in order keep their order across outboxes: an application may stage through two
// (one Required, one Fallback, say) over one store and one clock, into one transaction, and a
// wall clock that steps back (NTP) between the two stages must not put the second row first.
func TestStagedAtNeverGoesBackwardsAcrossOutboxes(t *testing.T) {
	t.Parallel()
	mem := NewMemoryStore()
	clk := &steppingClock{now: time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)}
	ob1, err := New(Config{Store: mem, Mode: Required, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ob2, err := New(Config{Store: mem, Mode: Fallback, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	// ob2 has staged before, at an earlier time.
	warm := mem.Begin()
	if _, err := noteJob.EnqueueTx(t.Context(), ob2.Tx(warm), Note{ID: "warm"}); err != nil {
		t.Fatal(err)
	}
	_ = warm.Rollback()
	clk.set(clk.Now().Add(2 * time.Second))
	tx := mem.Begin()
	if _, err := noteJob.EnqueueTx(t.Context(), ob1.Tx(tx), Note{ID: "invoice"}); err != nil {
		t.Fatal(err)
	}
	clk.set(clk.Now().Add(-time.Second)) // the wall clock steps back
	if _, err := noteJob.EnqueueTx(t.Context(), ob2.Tx(tx), Note{ID: "charge"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	rows, err := mem.Claim(t.Context(), "r", clk.Now(), time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Request.Key)
	}
	if want := keys("invoice", "charge"); !slices.Equal(got, want) {
		t.Fatalf("claim order %v, want %v (the order they were staged in, in one transaction)", got, want)
	}
}

// steppingClock is a wall clock that, like a real one under NTP, may step back.
type steppingClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *steppingClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *steppingClock) NewTimer(d time.Duration) clock.Timer { return clock.Real{}.NewTimer(d) }

// Staging into a transaction that already ended (committed or rolled back) is X_OUTBOX_NO_TX on
// every store, as the Store contract says: it is not X_STORE_UNAVAILABLE, which a caller retries
// and no retry can fix.
func TestStageIntoAnEndedTransactionIsNoTx(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ob, err := New(Config{Store: b.outbox, Mode: Required})
			if err != nil {
				t.Fatal(err)
			}
			for _, end := range []string{"committed", "rolled back"} {
				tx, commit, rollback := b.begin(t)
				endTx := commit
				if end == "rolled back" {
					endTx = rollback
				}
				if err := endTx(); err != nil {
					t.Fatal(err)
				}
				_, err = noteJob.EnqueueTx(t.Context(), ob.Tx(tx), Note{ID: "late"})
				wantCode(t, "stage into a "+end+" transaction", err, jobs.CodeOutboxNoTx)
			}
			if n := backlogOf(t, b.outbox); n != 0 {
				t.Errorf("stages into ended transactions left %d rows in line", n)
			}
		})
	}
}

func rowIDs(rows []Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// Exactly once past the live key: a relay crashes between publishing a row and marking it,
// the run completes, and the republish creates no second run.
func TestCrashAfterCompletionRunsOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, env *testenv.Env) {
		var mu sync.Mutex
		ran := 0
		counted := jobs.MustDefine("counted", func(in Note) string { return in.ID }, jobs.NoTenant[Note](),
			func(c *jobs.Ctx, in Note) (int, error) {
				mu.Lock()
				defer mu.Unlock()
				ran++
				return ran, nil
			})
		env.Worker(workerConfig(), counted)
		ob := newOutbox(t, b, env, Required)
		tx, commit, _ := b.begin(t)
		if _, err := counted.EnqueueTx(t.Context(), ob.Tx(tx), Note{ID: "once"}); err != nil {
			t.Fatal(err)
		}
		if err := commit(); err != nil {
			t.Fatal(err)
		}
		rec := &recorder{next: env.Engine}
		crashing := newRelay(t, b, env, rec, "crashing", 10)
		crashing.afterPublish = func(int) bool { return false }
		pass(t, crashing)
		if len(rec.res) != 1 {
			t.Fatalf("published %d", len(rec.res))
		}
		first := env.Await(rec.res[0].RunID, store.StateCompleted)
		env.Fake().Advance(DefaultLease + time.Second)
		if n := pass(t, newRelay(t, b, env, rec, "next", 10)); n != 1 {
			t.Fatalf("the next relay published %d, want the unmarked row", n)
		}
		if rec.res[1].RunID != first.ID || !rec.res[1].Deduped {
			t.Errorf("the republish got %+v; want run %s, deduped", rec.res[1], first.ID)
		}
		runs, err := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "counted"})
		if err != nil || len(runs) != 1 {
			t.Fatalf("%d runs of the job (%v), want 1", len(runs), err)
		}
		mu.Lock()
		defer mu.Unlock()
		if ran != 1 {
			t.Errorf("the handler ran %d times, want 1", ran)
		}
	})
}

// mode: required refuses an enqueue with no transaction in reach; the default falls back to a
// direct enqueue.
func TestModes(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, env *testenv.Env) {
		required := newOutbox(t, b, env, Required)
		_, err := noteJob.Enqueue(t.Context(), required, Note{ID: "no-tx"})
		wantCode(t, "required, plain enqueue", err, jobs.CodeOutboxNoTx)
		_, err = noteJob.EnqueueTx(t.Context(), required.Tx(nil), Note{ID: "nil-tx"})
		wantCode(t, "required, nil tx", err, jobs.CodeOutboxNoTx)
		_, err = noteJob.EnqueueTx(t.Context(), nil, Note{ID: "no-enqueuer"})
		wantCode(t, "EnqueueTx(nil)", err, jobs.CodeOutboxNoTx)
		if n, _, _ := b.outbox.Backlog(t.Context()); n != 0 || len(runsOf(t, env)) != 0 {
			t.Fatalf("a refused enqueue left %d rows and %d runs", n, len(runsOf(t, env)))
		}
		// The transaction on the context is in reach.
		tx, commit, _ := b.begin(t)
		res, err := noteJob.Enqueue(WithTx(t.Context(), tx), required, Note{ID: "ctx-tx"})
		if err != nil || res.Staged == "" {
			t.Fatalf("enqueue with the tx on the context: %+v, %v", res, err)
		}
		if err := commit(); err != nil {
			t.Fatal(err)
		}

		fallback := newOutbox(t, b, env, Fallback)
		res, err = noteJob.Enqueue(t.Context(), fallback, Note{ID: "direct"})
		if err != nil || res.RunID == "" || res.Staged != "" {
			t.Fatalf("fallback: %+v, %v; want a direct run", res, err)
		}
		if _, err := env.Engine.GetRun(t.Context(), res.RunID); err != nil {
			t.Errorf("the direct run: %v", err)
		}
	})
}

func TestStageRefusals(t *testing.T) {
	t.Parallel()
	mem := NewMemoryStore()
	ob, err := New(Config{Store: mem, Mode: Required})
	if err != nil {
		t.Fatal(err)
	}
	other := NewMemoryStore().Begin()
	_, err = noteJob.EnqueueTx(t.Context(), ob.Tx(other), Note{ID: "x"})
	wantCode(t, "another store's transaction", err, jobs.CodeOutboxNoTx)
	tx := mem.Begin()
	_, err = ob.Tx(tx).EnqueueTx(t.Context(), jobs.EnqueueRequest{Job: "j", Key: "k"})
	wantCode(t, "no tenant", err, jobs.CodeJobTenantRequired)
	_, err = ob.Tx(tx).EnqueueTx(t.Context(), jobs.EnqueueRequest{Job: "j", Key: "k", NoTenant: true, DedupeID: "mine"})
	wantCode(t, "a caller's dedupe id", err, jobs.CodeBadRequest)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := mem.Backlog(t.Context()); n != 0 {
		t.Errorf("refused enqueues staged %d rows", n)
	}
	_, err = New(Config{})
	wantCode(t, "no store", err, jobs.CodeInvariant)
	_, err = New(Config{Store: mem, Mode: 7})
	wantCode(t, "unknown mode", err, jobs.CodeInvariant)
}

func TestNewRelayRefusesBadConfig(t *testing.T) {
	t.Parallel()
	mem := NewMemoryStore()
	pub := jobs.Enqueuer(nil)
	for name, cfg := range map[string]RelayConfig{
		"no store":          {Publisher: &recorder{}},
		"no publisher":      {Store: mem, Publisher: pub},
		"negative lease":    {Store: mem, Publisher: &recorder{}, Lease: -time.Second},
		"negative batch":    {Store: mem, Publisher: &recorder{}, Batch: -1},
		"negative interval": {Store: mem, Publisher: &recorder{}, Interval: -time.Millisecond},
	} {
		if _, err := NewRelay(cfg); jobs.CodeOf(err) != jobs.CodeInvariant {
			t.Errorf("%s: %v, want X_INVARIANT", name, err)
		}
	}
	r, err := NewRelay(RelayConfig{Store: mem, Publisher: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	if r.cfg.Lease != 30*time.Second || !strings.HasPrefix(r.ID(), "relay-") {
		t.Errorf("defaults: lease %s, id %q", r.cfg.Lease, r.ID())
	}
}
