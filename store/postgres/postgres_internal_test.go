package postgres

// Tests of what store/storetest cannot see from the interface: migrations racing, the round
// trips a call costs, a commit whose outcome is lost with the connection, LISTEN/NOTIFY, two
// processes sharing one schema, and batches that only this backend's pipelining makes tricky.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/storetest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func runID(n int) string { return fmt.Sprintf("00000000-0000-7000-8000-%012d", n) }

func newRun(n int, queue string) store.CreateRunParams {
	r := store.Run{ID: runID(n), Job: "job", Queue: queue, Key: fmt.Sprintf("key-%d", n), State: store.StateReady,
		Attempt: 1, ReadyAt: t0, CreatedAt: t0, Input: []byte("in")}
	return store.CreateRunParams{Run: r, Started: history.New(t0, history.RunStarted{Job: r.Job, Queue: queue, Key: r.Key})}
}

// runningRuns creates n runs in queue q and claims them all for worker "w".
func runningRuns(t testing.TB, s *Store, first, n int, q string) []store.Run {
	t.Helper()
	ctx := context.Background()
	ps := make([]store.CreateRunParams, n)
	for i := range ps {
		ps[i] = newRun(first+i, q)
	}
	if _, err := s.RunCreate(ctx, ps); err != nil {
		t.Fatal(err)
	}
	runs, err := s.RunClaim(ctx, store.ClaimParams{WorkerID: "w", Queues: []string{q}, Limit: n, Now: t0,
		LeaseUntil: t0.Add(time.Hour), StickyBefore: t0})
	if err != nil || len(runs) != n {
		t.Fatalf("RunClaim: %d runs, %v; want %d", len(runs), err, n)
	}
	return runs
}

func stepMutation(r store.Run, name string) store.Mutation {
	return store.Mutation{RunID: r.ID, Fence: r.Fence, Now: t0.Add(time.Second),
		Events: []history.Event{history.New(t0, history.StepCompleted{StepName: name, Output: []byte(name)})}}
}

func applyAll(t testing.TB, s *Store, ms []store.Mutation) []store.MutationResult {
	t.Helper()
	res, err := s.RunApply(context.Background(), ms)
	if err != nil {
		t.Fatalf("RunApply: %v", err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("RunApply mutation %d: %v", i, r.Err)
		}
	}
	return res
}

// ---- migrations ----

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	schema := FreshSchema(t)
	ctx := context.Background()

	// Without the advisory lock, the racing CREATE SCHEMA / CREATE TABLE statements fail with
	// unique violations on the catalogs, and two ledgers could both record a migration.
	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = Migrate(ctx, Config{URL: url, Schema: schema}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate %d: %v", i, err)
		}
	}
	if err := Migrate(ctx, Config{URL: url, Schema: schema}); err != nil {
		t.Errorf("Migrate again: %v", err)
	}

	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows, versions int
	err = conn.QueryRow(ctx, "SELECT count(*), count(DISTINCT version) FROM "+pgx.Identifier{schema}.Sanitize()+
		".schema_migrations").Scan(&rows, &versions)
	if err != nil {
		t.Fatal(err)
	}
	if rows != len(ms) || versions != len(ms) {
		t.Errorf("ledger holds %d rows of %d versions, want each of the %d migrations once", rows, versions, len(ms))
	}
	var tables int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = $1", schema).Scan(&tables)
	// runs history timers waits events deliveries slots schema_migrations (001), keys
	// manifest_workers declarations declaration_workers (authority), leaders schedules
	// (schedules), backfills (backfills), dedupe (dedupe), fence_epoch
	if err != nil || tables != 19 {
		t.Errorf("schema %s has %d tables, %v; want 19", schema, tables, err)
	}
}

func TestConfigIsValidated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := Open(ctx, Config{}); jobs.CodeOf(err) != jobs.CodeDriverUnavailable {
		t.Errorf("Open without a URL: %v, want %s", err, jobs.CodeDriverUnavailable)
	}
	for _, schema := range []string{"Jobs", "jobs-x", `jobs"; DROP TABLE x; --`, "1jobs", strings.Repeat("j", 58)} {
		_, err := Open(ctx, Config{URL: "postgres://localhost/x", Schema: schema})
		if jobs.CodeOf(err) != jobs.CodeBadRequest {
			t.Errorf("Open with schema %q: %v, want %s", schema, err, jobs.CodeBadRequest)
		}
	}
	c, err := Config{URL: "postgres://localhost/x"}.withDefaults()
	if err != nil || c.Schema != "jobs" || c.MaxConns != defaultMaxConns || c.Logger == nil {
		t.Errorf("defaults: %+v, %v", c, err)
	}
}

// TestPoolOpensItsConnectionsAhead: by default the whole pool opens as the store opens, with
// nothing asked of it, and each connection holds its fence epoch; MinConns and the URL's
// pool_min_conns size that, and a negative MinConns opens nothing ahead. The store's own watch of
// a new schema (analyze.go) may open one connection more than that when it reads before the pool
// has opened the rest.
func TestPoolOpensItsConnectionsAhead(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	for _, c := range []struct {
		name string
		cfg  Config
		want int32
	}{
		{"default", Config{MaxConns: 6}, 6},
		{"MinConns", Config{MaxConns: 6, MinConns: 2}, 2},
		{"above MaxConns", Config{MaxConns: 6, MinConns: 9}, 6},
		{"pool_min_conns", Config{URL: url + sep + "pool_min_conns=1", MaxConns: 6}, 1},
		{"none", Config{MaxConns: 6, MinConns: -1}, 0},
	} {
		s := OpenTest(t, c.cfg)
		var open, idle int32
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			st := s.pool.Stat()
			open, idle = st.TotalConns(), st.IdleConns()
			if open >= c.want && idle == open || time.Now().After(deadline) {
				break
			}
		}
		if c.want < 6 {
			time.Sleep(300 * time.Millisecond) // a background open beyond want would have begun by now
			open = s.pool.Stat().TotalConns()
		}
		if open < c.want || open > max(c.want, 1)+1 || open > 6 {
			t.Errorf("%s: %d connections open with nothing asked, want %d (or one more)", c.name, open, c.want)
		}
		if c.want == 0 {
			continue
		}
		// Every connection opened ahead took its epoch as it opened (afterConnect).
		conns := s.pool.AcquireAllIdle(context.Background())
		for _, conn := range conns {
			var epoch string
			if err := conn.QueryRow(context.Background(), "SELECT current_setting($1, true)", epochSetting(s.schema)).Scan(&epoch); err != nil || epoch == "" {
				t.Errorf("%s: a connection opened ahead holds epoch %q (%v)", c.name, epoch, err)
			}
			conn.Release()
		}
	}
}

// TestSchemasAreIsolated: two stores on two schemas of one database share nothing, not even a
// run id.
func TestSchemasAreIsolated(t *testing.T) {
	t.Parallel()
	a := OpenTest(t, Config{})
	b := OpenTest(t, Config{})
	ctx := context.Background()
	pa, pb := newRun(1, "q"), newRun(1, "q")
	pa.Run.Input, pb.Run.Input = []byte("a"), []byte("b")
	for _, c := range []struct {
		s *Store
		p store.CreateRunParams
	}{{a, pa}, {b, pb}} {
		res, err := c.s.RunCreate(ctx, []store.CreateRunParams{c.p})
		if err != nil || res[0].Deduped {
			t.Fatalf("RunCreate in %s: %v, %+v", c.s.schema, err, res)
		}
	}
	for _, c := range []struct {
		s    *Store
		want string
	}{{a, "a"}, {b, "b"}} {
		if r, err := c.s.RunGet(ctx, runID(1)); err != nil || string(r.Input) != c.want {
			t.Errorf("RunGet in %s: %q, %v; want input %q", c.s.schema, r.Input, err, c.want)
		}
	}
}

// ---- the wire: round trips and cut connections ----

// wire wraps every connection of a pool: it counts round trips (a read that returns data after
// a write, however many reads and writes each side takes) and can cut the connection right
// after a chosen write, as a network failure with that write in flight would.
type wire struct {
	trips atomic.Int64
	// cutAt, when > 0, counts writes down; the write that brings it to 0 is sent, and then the
	// connection is closed under the client.
	cutAt atomic.Int64
}

type wireConn struct {
	net.Conn
	w     *wire
	wrote atomic.Bool
}

func (c *wireConn) Write(p []byte) (int, error) {
	// Marked before writing: the answer may be read (on pgconn's background reader) before
	// Write returns.
	c.wrote.Store(true)
	n, err := c.Conn.Write(p)
	if c.w.cutAt.Load() > 0 && c.w.cutAt.Add(-1) == 0 {
		c.Conn.Close()
	}
	return n, err
}

func (c *wireConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.wrote.Swap(false) {
		c.w.trips.Add(1)
	}
	return n, err
}

// openWired opens a store on a fresh schema whose one connection goes through a wire.
func openWired(t *testing.T) (*Store, *wire) {
	t.Helper()
	w := &wire{}
	s, err := open(context.Background(), Config{URL: testURL(t), Schema: FreshSchema(t), MaxConns: 1},
		func(c *pgxpool.Config) {
			c.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
				conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &wireConn{Conn: conn, w: w}, nil
			}
			// A liveness ping on acquire would be a round trip of its own.
			c.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, w
}

// TestRoundTrips pins the round trips of the hot calls, after the statement cache is warm (the
// first use of a statement on a connection costs one more, to prepare it). RunApply must not
// grow with the batch: a group commit of 32 steps costs what one step costs.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	s, w := openWired(t)
	ctx := context.Background()
	runs := runningRuns(t, s, 1, 64, "q")

	steps := func(rs []store.Run, name string) []store.Mutation {
		ms := make([]store.Mutation, len(rs))
		for i, r := range rs {
			ms[i] = stepMutation(r, name)
		}
		return ms
	}
	count := func(what string, want int64, call func()) {
		t.Helper()
		call() // warm: prepares the statements on the connection
		w.trips.Store(0)
		call()
		if got := w.trips.Load(); got != want {
			t.Errorf("%s: %d round trips, want %d", what, got, want)
		}
	}
	i := 0
	next := func() string { i++; return fmt.Sprintf("s%d", i) }
	// Steps (and completions) take the one-statement path: the statement alone, in its
	// pipeline's implicit transaction.
	count("RunApply, 1 step", 1, func() { applyAll(t, s, steps(runs[:1], next())) })
	count("RunApply, 32 steps", 1, func() { applyAll(t, s, steps(runs[:32], next())) })
	count("RunApply, 64 steps", 1, func() { applyAll(t, s, steps(runs, next())) })

	// A mixed batch: steps, a suspension on a wait (lookback query, advisory lock, wait and
	// timer rows), a hand-back and a completion.
	sets := [][]store.Run{runningRuns(t, s, 100, 4, "m1"), runningRuns(t, s, 200, 4, "m2")}
	count("RunApply, mixed batch", 2, func() {
		rs := sets[0]
		sets = sets[1:]
		ms := steps(rs[:1], "s")
		ms = append(ms, store.Mutation{RunID: rs[1].ID, Fence: rs[1].Fence, Now: t0, Transition: store.Transition{
			State: store.StateSuspended, Sticky: true, Timers: []store.Timer{{Key: "w", DueAt: t0.Add(time.Hour)}},
			Wait: &store.Wait{Name: "w", Event: "paid", Match: []string{`order=1`}, LookbackFrom: t0}}})
		ms = append(ms, store.Mutation{RunID: rs[2].ID, Fence: rs[2].Fence, Now: t0,
			Transition: store.Transition{State: store.StateReady}})
		ms = append(ms, store.Mutation{RunID: rs[3].ID, Fence: rs[3].Fence, Now: t0,
			Transition: store.Transition{State: store.StateCompleted, Result: []byte("r")}})
		applyAll(t, s, ms)
	})

	created := 1000
	count("RunCreate, 32 runs", 2, func() {
		ps := make([]store.CreateRunParams, 32)
		for j := range ps {
			ps[j] = newRun(created+j, "c")
		}
		created += 32
		if _, err := s.RunCreate(ctx, ps); err != nil {
			t.Fatal(err)
		}
	})
	count("RunClaim", 1, func() {
		if _, err := s.RunClaim(ctx, store.ClaimParams{WorkerID: "w", Queues: []string{"c"}, Limit: 8, Now: t0,
			LeaseUntil: t0.Add(time.Hour), StickyBefore: t0}); err != nil {
			t.Fatal(err)
		}
	})
	count("RunHeartbeat, 64 leases", 1, func() {
		leases := make([]store.Lease, len(runs))
		for j, r := range runs {
			leases[j] = store.Lease{RunID: r.ID, Fence: r.Fence}
		}
		if _, err := s.RunHeartbeat(ctx, store.HeartbeatParams{WorkerID: "w", Leases: leases, Now: t0,
			LeaseUntil: t0.Add(2 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	})
	count("HistoryRead", 1, func() {
		if _, err := s.HistoryRead(ctx, runs[0].ID, 0, 0); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCommitOutcomeUnknown cuts the connection right after the pipeline that carries COMMIT is
// sent. The call cannot know whether it committed and says so (X_COMMIT_UNKNOWN); reading the
// history answers it, which is how the engine recovers. Cut one pipeline earlier, the call
// knows nothing committed (X_STORE_UNAVAILABLE).
func TestCommitOutcomeUnknown(t *testing.T) {
	t.Parallel()
	s, w := openWired(t)
	ctx := context.Background()
	runs := runningRuns(t, s, 1, 2, "q")
	applyAll(t, s, []store.Mutation{stepMutation(runs[0], "warm"), stepMutation(runs[1], "warm")})

	// A suspension takes two pipelines: lock and read, then write and commit. Cut after the
	// first, nothing was committed.
	suspend := stepMutation(runs[0], "lost-before-commit")
	suspend.State = store.StateSuspended
	suspend.Timers = []store.Timer{{Key: "wake", DueAt: t0.Add(time.Hour)}}
	applyAll(t, s, []store.Mutation{stepMutation(runs[0], "warm the two-pipeline path")})
	w.cutAt.Store(1)
	_, err := s.RunApply(ctx, []store.Mutation{suspend})
	if jobs.CodeOf(err) != jobs.CodeStoreUnavailable {
		t.Errorf("cut after the first pipeline: %v, want %s", err, jobs.CodeStoreUnavailable)
	}

	// The pool dials a new connection; warm it (its statements are prepared on first use).
	applyAll(t, s, []store.Mutation{stepMutation(runs[0], "warm again")})
	applyAll(t, s, []store.Mutation{stepMutation(runs[0], "warm again 2")})

	// A step batch is one pipeline, whose Sync commits it.
	w.cutAt.Store(1)
	_, err = s.RunApply(ctx, []store.Mutation{stepMutation(runs[1], "in-flight")})
	if jobs.CodeOf(err) != jobs.CodeCommitUnknown {
		t.Fatalf("cut after the COMMIT pipeline: %v, want %s", err, jobs.CodeCommitUnknown)
	}

	// The pool replaced the cut connection. Whether the server read COMMIT before it saw the
	// connection go is a race (the client's socket answers the server's output with a reset,
	// which can discard input the server has not read yet): the step is in the history once, or
	// not at all, and reading the history is the only way to know.
	names := func(id string) []string {
		evs, err := s.HistoryRead(ctx, id, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range evs {
			out = append(out, e.Name)
		}
		return out
	}
	if got := names(runs[0].ID); !slices.Equal(got, []string{"warm", "warm the two-pipeline path", "warm again", "warm again 2"}) {
		t.Errorf("run 1 history %v: the step cut before COMMIT must not be there", got)
	}
	// Give the server's side of the cut connection time to finish or abort its transaction.
	deadline := time.Now().Add(2 * time.Second)
	got := names(runs[1].ID)
	for !slices.Equal(got, []string{"warm", "in-flight"}) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		got = names(runs[1].ID)
	}
	switch {
	case slices.Equal(got, []string{"warm", "in-flight"}):
		t.Log("the in-flight commit committed")
	case slices.Equal(got, []string{"warm"}):
		t.Log("the in-flight commit rolled back")
	default:
		t.Errorf("run 2 history %v: want the in-flight step once or not at all", got)
	}
	// Either way the run is consistent and the store goes on.
	applyAll(t, s, []store.Mutation{stepMutation(runs[1], "after")})
}

// ---- notifications ----

func TestSubscribe(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	expect := func(what string, want store.Signal) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case got, ok := <-sigs:
				if !ok {
					t.Fatalf("%s: the channel closed", what)
				}
				if got == want {
					return
				}
			case <-timeout:
				t.Fatalf("%s: no %+v within 10s", what, want)
			}
		}
	}

	if _, err := s.RunCreate(ctx, []store.CreateRunParams{newRun(1, "orders")}); err != nil {
		t.Fatal(err)
	}
	expect("create", store.Signal{Queue: "orders", Fresh: true})
	if _, err := s.RunCreateBulk(ctx, []store.CreateRunParams{newRun(4, "bulk")}); err != nil {
		t.Fatal(err)
	}
	expect("bulk create", store.Signal{Queue: "bulk", Fresh: true})

	r := runningRuns(t, s, 2, 1, "mail")[0]
	applyAll(t, s, []store.Mutation{{RunID: r.ID, Fence: r.Fence, Now: t0, Transition: store.Transition{
		State: store.StateSuspended, Timers: []store.Timer{{Key: "sleep", DueAt: t0.Add(time.Minute)}}}}})
	expect("a timer armed", store.Signal{Timer: true})
	if _, err := s.TimerFire(ctx, t0.Add(time.Minute), 10); err != nil {
		t.Fatal(err)
	}
	expect("a timer fired", store.Signal{Queue: "mail"})

	r = runningRuns(t, s, 10, 1, "billing")[0]
	expect("create billing", store.Signal{Queue: "billing", Fresh: true}) // so the next one is the delivery's
	applyAll(t, s, []store.Mutation{{RunID: r.ID, Fence: r.Fence, Now: t0, Transition: store.Transition{
		State: store.StateSuspended, Wait: &store.Wait{Name: "w", Event: "paid", LookbackFrom: t0.Add(time.Hour)}}}})
	if d, err := s.RunPublish(ctx, store.PublishParams{ID: "e1", Name: "paid", Now: t0.Add(2 * time.Hour)}); err != nil || len(d.Delivered) != 1 {
		t.Fatalf("RunPublish: %+v, %v", d, err)
	}
	expect("an event delivered", store.Signal{Queue: "billing"})

	// The listener's connection dies: it reconnects, says so with a timer signal, and listens on.
	var pid int32
	err = s.pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE query = $1`,
		fmt.Sprintf(`LISTEN "%s_timer"`, s.schema)).Scan(&pid)
	if err != nil {
		t.Fatalf("find the listener: %v", err)
	}
	if _, err := s.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	expect("reconnected", store.Signal{Timer: true})
	if _, err := s.RunCreate(ctx, []store.CreateRunParams{newRun(3, "after")}); err != nil {
		t.Fatal(err)
	}
	expect("create after the reconnect", store.Signal{Queue: "after", Fresh: true})

	cancel()
	for range sigs { // closed once the listener is done
	}
}

// ---- two processes ----

// TestTwoStoresShareASchema runs the races of the contract between two stores (two pools, as two
// processes would have) on one schema: timer services firing, and a publish racing a wait.
func TestTwoStoresShareASchema(t *testing.T) {
	t.Parallel()
	schema := FreshSchema(t)
	a := OpenTest(t, Config{Schema: schema})
	b := OpenTest(t, Config{Schema: schema})
	ctx := context.Background()

	const n = 120
	runs := runningRuns(t, a, 1, n, "q")
	ms := make([]store.Mutation, n)
	for i, r := range runs {
		fired := history.New(t0, history.TimerFired{TimerName: "sleep"})
		ms[i] = store.Mutation{RunID: r.ID, Fence: r.Fence, Now: t0, Transition: store.Transition{
			State: store.StateSuspended, Timers: []store.Timer{{Key: "sleep", DueAt: t0.Add(time.Duration(i%4) * time.Minute), Fire: &fired}}}}
	}
	applyAll(t, a, ms)
	woken := storetest.FireConcurrently(t, t0.Add(time.Hour), 5, a, b, a, b)
	for _, r := range runs {
		if woken[r.ID] != 1 {
			t.Errorf("run %s woken %d times", r.ID, woken[r.ID])
		}
		evs, err := b.HistoryRead(ctx, r.ID, 0, 0)
		if err != nil || len(evs) != 2 || evs[1].Kind != history.KindTimerFired {
			t.Errorf("run %s history %v, %v; want RunStarted, TimerFired", r.ID, evs, err)
		}
	}

	// A wait registered through a while b publishes the matching event.
	for i := range 30 {
		r := runningRuns(t, a, 1000+i, 1, fmt.Sprintf("race-%d", i))[0]
		match := []string{fmt.Sprintf("order=%d", i)}
		m := store.Mutation{RunID: r.ID, Fence: r.Fence, Now: t0, Transition: store.Transition{
			State: store.StateSuspended, Wait: &store.Wait{Name: "w", Event: "paid", Match: match, LookbackFrom: t0}}}
		var applied []store.MutationResult
		var published store.PublishResult
		var aErr, pErr error
		var wg sync.WaitGroup
		wg.Go(func() { applied, aErr = a.RunApply(ctx, []store.Mutation{m}) })
		wg.Go(func() {
			published, pErr = b.RunPublish(ctx, store.PublishParams{ID: fmt.Sprintf("e%d", i), Name: "paid",
				Fields: match, Now: t0})
		})
		wg.Wait()
		if aErr != nil || pErr != nil || applied[0].Err != nil {
			t.Fatalf("round %d: %v %v %v", i, aErr, pErr, applied)
		}
		evs, err := a.HistoryRead(ctx, r.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, e := range evs {
			if e.Kind == history.KindEventReceived {
				got++
			}
		}
		byLookback := len(applied[0].Appended) == 1
		if got != 1 || byLookback == (len(published.Delivered) == 1) {
			t.Errorf("round %d: %d EventReceived, by lookback %v, by publish %v; want exactly one",
				i, got, byLookback, published.Delivered)
		}
	}
}

// ---- batches ----

// TestBatchGivesEachWaitOfARunItsOwnEvent: the lookback queries of a batch run before any of it
// is decided, so two waits of one run in one batch must not both take the earliest event.
func TestBatchGivesEachWaitOfARunItsOwnEvent(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{})
	ctx := context.Background()
	for i, at := range []time.Duration{time.Second, 2 * time.Second} {
		if _, err := s.RunPublish(ctx, store.PublishParams{ID: fmt.Sprintf("e%d", i+1), Name: "e",
			Fields: []string{"k=1"}, Now: t0.Add(at)}); err != nil {
			t.Fatal(err)
		}
	}
	r := runningRuns(t, s, 1, 1, "q")[0]
	wait := func(name string) store.Mutation {
		return store.Mutation{RunID: r.ID, Fence: r.Fence, Now: t0.Add(time.Minute), Transition: store.Transition{
			State: store.StateSuspended, Wait: &store.Wait{Name: name, Event: "e", Match: []string{"k=1"}, LookbackFrom: t0}}}
	}
	res := applyAll(t, s, []store.Mutation{wait("w1"), wait("w2"), wait("w3")})
	var got []string
	for _, x := range res[:2] {
		for _, e := range x.Appended {
			p, err := e.Decode()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p.(history.EventReceived).EventID)
		}
	}
	if !slices.Equal(got, []string{"e1", "e2"}) {
		t.Errorf("the first two waits received %v, want [e1 e2]", got)
	}
	if res[2].Run.State != store.StateSuspended || len(res[2].Appended) != 0 {
		t.Errorf("third wait: %s, appended %d; want it registered", res[2].Run.State, len(res[2].Appended))
	}
	if d, err := s.RunPublish(ctx, store.PublishParams{ID: "e3", Name: "e", Fields: []string{"k=1"}, Now: t0.Add(time.Hour)}); err != nil || len(d.Delivered) != 1 {
		t.Errorf("publish to the registered wait: %v, %v", d, err)
	}
}

// TestConcurrentBatchesDoNotDeadlock: group commits over overlapping runs in different orders,
// heartbeats over them in reverse order, and publishes taking the event lock, all at once. Run
// locks in id order and advisory locks before run locks keep them from deadlocking; a deadlock
// would surface as an error (SQLSTATE 40P01) after deadlock_timeout.
func TestConcurrentBatchesDoNotDeadlock(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{MaxConns: 8})
	ctx := context.Background()
	runs := runningRuns(t, s, 1, 24, "q")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 25 {
				ms := shuffledSteps(rng, runs, 12, fmt.Sprintf("g%d-%d", g, i))
				// The batch also registers a wait, so it takes an event name's advisory lock as a
				// suspension does. The run stays running, and nothing is published after
				// LookbackFrom, so the wait is only registered.
				ms[0].Wait = &store.Wait{Name: fmt.Sprintf("w%d-%d", g, i), Event: fmt.Sprintf("ev%d", rng.IntN(3)),
					LookbackFrom: t0.Add(time.Hour)}
				if _, err := s.RunApply(ctx, ms); err != nil {
					t.Errorf("RunApply: %v", err)
					return
				}
			}
		})
	}
	wg.Go(func() { heartbeatDescending(t, s, runs, 50) })
	wg.Go(func() {
		for i := range 50 {
			if _, err := s.RunPublish(ctx, store.PublishParams{ID: fmt.Sprintf("p%d", i), Name: fmt.Sprintf("ev%d", i%3), Now: t0}); err != nil {
				t.Errorf("RunPublish: %v", err)
				return
			}
		}
	})
	wg.Wait()
	assertContiguous(t, s, runs)
}

// shuffledSteps is a batch of n completed steps over runs taken in a random order, each step
// named prefix-j.
func shuffledSteps(rng *rand.Rand, runs []store.Run, n int, prefix string) []store.Mutation {
	order := slices.Clone(runs)
	rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
	ms := make([]store.Mutation, n)
	for j := range ms {
		ms[j] = stepMutation(order[j], fmt.Sprintf("%s-%d", prefix, j))
	}
	return ms
}

// heartbeatDescending extends the runs' leases n times, naming them in descending id order: the
// order that would deadlock against a batch locking in another order than ascending ids.
func heartbeatDescending(t *testing.T, s *Store, runs []store.Run, n int) {
	leases := make([]store.Lease, len(runs))
	for j, r := range runs {
		leases[len(runs)-1-j] = store.Lease{RunID: r.ID, Fence: r.Fence}
	}
	for range n {
		if _, err := s.RunHeartbeat(context.Background(), store.HeartbeatParams{WorkerID: "w", Leases: leases,
			Now: t0, LeaseUntil: t0.Add(time.Hour)}); err != nil {
			t.Errorf("RunHeartbeat: %v", err)
			return
		}
	}
}

// assertContiguous checks that every run's history reads back with seqs 1, 2, 3, … and no gap.
func assertContiguous(t *testing.T, s *Store, runs []store.Run) {
	t.Helper()
	for _, r := range runs {
		evs, err := s.HistoryRead(context.Background(), r.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				t.Fatalf("run %s: event %d has seq %d", r.ID, i, e.Seq)
			}
		}
	}
}

// ---- benchmark ----

// BenchmarkApplyStep measures what a group commit buys: one RunApply carrying 32 completed steps
// against one carrying a single step. Both cost the same two round trips and one commit (one
// WAL flush, fsync on under scripts/with-postgres.sh), so the per-step cost of the batch of 32
// should be a small fraction of the single step's; mutations/s is the figure to compare with the
// machine's commit ceiling. Gathering 32 goroutines' steps into one call is the engine's job and
// is benchmarked there.
func BenchmarkApplyStep(b *testing.B) {
	for _, n := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			s := OpenTest(b, Config{MaxConns: 2})
			runs := runningRuns(b, s, 1, n, "q")
			ms := make([]store.Mutation, n)
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for ; b.Loop(); i++ {
				for j, r := range runs {
					ms[j] = stepMutation(r, fmt.Sprintf("s%d", i))
				}
				res, err := s.RunApply(ctx, ms)
				if err != nil || res[0].Err != nil {
					b.Fatalf("RunApply: %v %v", err, res)
				}
			}
			b.ReportMetric(float64(i*n)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}

// BenchmarkClaim measures one oldest-first claim of 32 runs (and its allocations); creating the
// runs it claims is left out of the timing.
func BenchmarkClaim(b *testing.B) {
	for _, fair := range []bool{false, true} {
		b.Run(fmt.Sprintf("fair=%v", fair), func(b *testing.B) {
			s := OpenTest(b, Config{MaxConns: 2})
			ctx := context.Background()
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				b.StopTimer()
				ps := make([]store.CreateRunParams, 32)
				for i := range ps {
					ps[i] = newRun(n, "q")
					n++
				}
				if _, err := s.RunCreate(ctx, ps); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				runs, err := s.RunClaim(ctx, store.ClaimParams{WorkerID: "w", Queues: []string{"q"}, Limit: 32,
					Now: t0, LeaseUntil: t0.Add(time.Hour), StickyBefore: t0, OldestFirst: !fair})
				if err != nil || len(runs) != 32 {
					b.Fatalf("RunClaim: %d runs, %v", len(runs), err)
				}
			}
		})
	}
}

// BenchmarkHistoryRead measures reading a run's whole history of 21 events (a ten-step run's).
func BenchmarkHistoryRead(b *testing.B) {
	s := OpenTest(b, Config{MaxConns: 2})
	ctx := context.Background()
	r := runningRuns(b, s, 1, 1, "q")[0]
	for i := range 10 {
		res := applyAll(b, s, []store.Mutation{
			{RunID: r.ID, Fence: r.Fence, Now: t0, Events: []history.Event{
				history.New(t0, history.StepCompleted{StepName: fmt.Sprintf("p%d", i), Output: []byte("out")}),
				history.New(t0, history.StepCompleted{StepName: fmt.Sprintf("s%d", i), Output: []byte("out")})}}})
		r = res[0].Run
	}
	b.ReportAllocs()
	for b.Loop() {
		evs, err := s.HistoryRead(ctx, r.ID, 0, 0)
		if err != nil || len(evs) != 21 {
			b.Fatalf("HistoryRead: %d events, %v", len(evs), err)
		}
	}
}

// TestAllocationsPerUnit holds the Go side of the hot statements to their allocations: an
// applied step, a claimed run, a created run and a read event. The bounds sit between what each
// costs now (about 6, 5, 18 and 6) and what it cost before the last change to it (13 and 7
// before a run row's shared columns were read as bytes, its id taken from the batch and the
// bigint arrays passed without boxing; 42 and 9 for the other two before the array parameters
// and the interned kinds), so any one of those coming back fails here.
func TestAllocationsPerUnit(t *testing.T) {
	if testing.Short() {
		t.Skip("counts allocations against a database")
	}
	s := OpenTest(t, Config{MaxConns: 2})
	ctx := context.Background()
	const n, rounds = 32, 10
	per := func(name string, units int, limit float64, f func()) {
		t.Helper()
		if got := testing.AllocsPerRun(rounds, f) / float64(units); got > limit {
			t.Errorf("%s: %.1f allocations per unit, want at most %.0f", name, got, limit)
		} else {
			t.Logf("%s: %.1f allocations per unit", name, got)
		}
	}

	runs := runningRuns(t, s, 1, n, "steps")
	ms := make([]store.Mutation, n)
	for j, r := range runs {
		ms[j] = stepMutation(r, "s")
	}
	per("applied step", n, 9, func() {
		if res, err := s.RunApply(ctx, ms); err != nil || res[0].Err != nil {
			t.Fatalf("RunApply: %v %v", err, res)
		}
	})

	ps := make([]store.CreateRunParams, n*(rounds+1))
	for i := range ps {
		ps[i] = newRun(1000+i, "claims")
	}
	if _, err := s.RunCreate(ctx, ps); err != nil {
		t.Fatal(err)
	}
	per("claimed run", n, 6, func() {
		got, err := s.RunClaim(ctx, store.ClaimParams{WorkerID: "w", Queues: []string{"claims"}, Limit: n,
			Now: t0, LeaseUntil: t0.Add(time.Hour), StickyBefore: t0, OldestFirst: true})
		if err != nil || len(got) != n {
			t.Fatalf("RunClaim: %d runs, %v", len(got), err)
		}
	})

	batches := make([][]store.CreateRunParams, rounds+1)
	for k := range batches {
		batches[k] = make([]store.CreateRunParams, n)
		for i := range batches[k] {
			batches[k][i] = newRun(100000+k*n+i, "created")
		}
	}
	k := 0
	per("created run", n, 25, func() {
		if _, err := s.RunCreate(ctx, batches[k]); err != nil {
			t.Fatal(err)
		}
		k++
	})

	// runs[0] now has its RunStarted and one step per RunApply above.
	events := 1 + rounds + 1
	per("read event", events, 7, func() {
		evs, err := s.HistoryRead(ctx, runs[0].ID, 0, 0)
		if err != nil || len(evs) != events {
			t.Fatalf("HistoryRead: %d events, %v", len(evs), err)
		}
	})
}

// BenchmarkRunCreate measures creating runs through RunCreate (the enqueue path, one run or a
// group of 32 a call), with its allocations.
func BenchmarkRunCreate(b *testing.B) {
	for _, n := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			s := OpenTest(b, Config{MaxConns: 2})
			ctx := context.Background()
			ps := make([]store.CreateRunParams, n)
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				b.StopTimer()
				for i := range ps {
					ps[i] = newRun(k, "q")
					k++
				}
				b.StartTimer()
				if _, err := s.RunCreate(ctx, ps); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestConcurrentStepBatchesDoNotDeadlock: the one-statement path of RunApply (steps only), four
// committers at once, each over runs of its own as the engine's are (a run has one record in
// flight), named in random orders, against heartbeats over all of them in reverse order. The
// statement takes its rows in whatever order its plan meets them; the heartbeat must never wait
// for a row while it holds another. A deadlock would surface as an error (SQLSTATE 40P01).
func TestConcurrentStepBatchesDoNotDeadlock(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{MaxConns: 8})
	ctx := context.Background()
	runs := runningRuns(t, s, 1, 64, "q")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			var own []store.Run // every fourth run, so each batch's runs interleave the others'
			for i := g; i < len(runs); i += 4 {
				own = append(own, runs[i])
			}
			for i := range 40 {
				ms := shuffledSteps(rng, own, 16, fmt.Sprintf("g%d-%d", g, i))
				if !stepsOnly(ms) {
					t.Error("the batch is not steps only")
					return
				}
				if _, err := s.RunApply(ctx, ms); err != nil {
					t.Errorf("RunApply: %v", err)
					return
				}
			}
		})
	}
	wg.Go(func() { heartbeatDescending(t, s, runs, 80) })
	wg.Wait()
	assertContiguous(t, s, runs)
}

// TestHeartbeatHoldsNoRowWhileItWaits: a transaction holds the second of two leased runs (as a
// step batch does while it writes) when a heartbeat over both starts, then asks for the first.
// A heartbeat that locked the first and waited for the second would close the cycle, and
// Postgres would end one of the two with a deadlock after deadlock_timeout. Both must finish,
// each lease extended.
func TestHeartbeatHoldsNoRowWhileItWaits(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{MaxConns: 4})
	ctx := context.Background()
	runs := runningRuns(t, s, 1, 2, "q")
	slices.SortFunc(runs, func(a, b store.Run) int { return strings.Compare(a.ID, b.ID) })
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	touch := s.render(`UPDATE {S}.runs SET updated_at = now() WHERE id = $1`)
	if _, err := tx.Exec(ctx, touch, runs[1].ID); err != nil {
		t.Fatal(err)
	}
	until := t0.Add(2 * time.Hour)
	type answer struct {
		errs []error
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		errs, err := s.RunHeartbeat(ctx, store.HeartbeatParams{WorkerID: "w", Now: t0, LeaseUntil: until,
			Leases: []store.Lease{{RunID: runs[0].ID, Fence: runs[0].Fence}, {RunID: runs[1].ID, Fence: runs[1].Fence}}})
		done <- answer{errs, err}
	}()
	// Until the heartbeat waits for a lock: then it has done all it can without the second run.
	awaitLockWait(t, s, "%AS l(id, fence, ord)%", "the heartbeat")
	if _, err := tx.Exec(ctx, touch, runs[0].ID); err != nil {
		t.Fatalf("the holder, asking for the first run: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil {
		t.Fatalf("RunHeartbeat: %v", a.err)
	}
	for i, err := range a.errs {
		if err != nil {
			t.Errorf("lease %d: %v", i, err)
		}
		got, err := s.RunGet(ctx, runs[i].ID)
		if err != nil || !got.LeaseUntil.Equal(until) {
			t.Errorf("run %d: lease until %v (%v), want %v", i, got.LeaseUntil, err, until)
		}
	}
}

// statementTracer counts the statements the pool's connections execute, those of pipelines
// included.
type statementTracer struct{ n atomic.Int64 }

func (c *statementTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *statementTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *statementTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *statementTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.n.Add(1)
}
func (c *statementTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestOneStatementCallsSendNoTransactionStatements pins the statements of the hot one-statement
// calls: a batch of steps is its statement alone and the fair claim its settings and itself, in
// their pipeline's implicit transaction, without BEGIN and COMMIT (which cost the server a
// statement each per call for nothing). It also checks what the implicit transaction must keep:
// a failing statement rolls back the whole pipeline, and set_config(…, true) holds for the
// statements after it in the pipeline and not beyond.
func TestOneStatementCallsSendNoTransactionStatements(t *testing.T) {
	t.Parallel()
	tr := &statementTracer{}
	s, err := open(context.Background(), Config{URL: testURL(t), Schema: FreshSchema(t), MaxConns: 1},
		func(c *pgxpool.Config) { c.ConnConfig.Tracer = tr })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	runs := runningRuns(t, s, 1, 8, "q")
	count := func(what string, want int64, call func()) {
		t.Helper()
		tr.n.Store(0)
		call()
		if got := tr.n.Load(); got != want {
			t.Errorf("%s: %d statements, want %d", what, got, want)
		}
	}
	count("RunApply, 8 steps", 1, func() {
		ms := make([]store.Mutation, len(runs))
		for i, r := range runs {
			ms[i] = stepMutation(r, "s")
		}
		applyAll(t, s, ms)
	})
	if _, err := s.RunCreate(ctx, []store.CreateRunParams{newRun(100, "c"), newRun(101, "c")}); err != nil {
		t.Fatal(err)
	}
	count("RunClaim", 2, func() {
		got, err := s.RunClaim(ctx, store.ClaimParams{WorkerID: "w", Queues: []string{"c"}, Limit: 8, Now: t0,
			LeaseUntil: t0.Add(time.Hour), StickyBefore: t0})
		if err != nil || len(got) != 2 {
			t.Fatalf("RunClaim: %d runs, %v; want 2", len(got), err)
		}
	})

	// The implicit transaction: the settings hold inside the pipeline only, and an error undoes
	// what the pipeline wrote before it.
	b := &pgx.Batch{}
	b.Queue(s.render(sqlClaimFairSettings))
	var inside, after string
	b.Queue("SHOW plan_cache_mode").QueryRow(func(r pgx.Row) error { return r.Scan(&inside) })
	if err := s.sendImplicit(ctx, "test", b); err != nil {
		t.Fatal(err)
	}
	if err := s.pool.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if inside != "force_generic_plan" || after != "auto" {
		t.Errorf("plan_cache_mode %q inside the pipeline and %q after it, want force_generic_plan and auto", inside, after)
	}
	b = &pgx.Batch{}
	b.Queue(s.render(`UPDATE {S}.runs SET last_seq = last_seq + 100 WHERE id = $1`), runs[0].ID)
	b.Queue(`SELECT 1/0`)
	if err := s.sendImplicit(ctx, "test", b); jobs.CodeOf(err) != jobs.CodeStoreUnavailable {
		t.Errorf("a failing pipeline: %v, want %s", err, jobs.CodeStoreUnavailable)
	}
	run, err := s.RunGet(ctx, runs[0].ID)
	if err != nil || run.LastSeq != 2 {
		t.Errorf("after the failing pipeline the run's last seq is %d (%v), want 2: its update was not rolled back", run.LastSeq, err)
	}
}

// TestStepBatchChecksTheRowAnotherTransactionChanged: the step batch has no lock step, so the
// fence check is its UPDATE's own condition, which Postgres evaluates again on the newest version
// of a row that another transaction changed while the batch waited for it. A lease extended
// meanwhile (a heartbeat) must let the step apply and keep the new lease; a run claimed again
// meanwhile (a new fence) must refuse it, with nothing appended.
func TestStepBatchChecksTheRowAnotherTransactionChanged(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{MaxConns: 4})
	ctx := context.Background()
	runs := runningRuns(t, s, 1, 2, "q")
	extended := t0.Add(3 * time.Hour)
	for _, c := range []struct {
		name, change string
		arg          any
		applies      bool
	}{
		{"lease extended", `UPDATE {S}.runs SET lease_until = $1 WHERE id = $2`, extended, true},
		{"claimed again", `UPDATE {S}.runs SET fence = fence + 1 WHERE id = $2 AND $1::bigint IS NOT NULL`, int64(1), false},
	} {
		run := runs[0]
		if !c.applies {
			run = runs[1]
		}
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, s.render(c.change), c.arg, run.ID); err != nil {
			t.Fatal(err)
		}
		type answer struct {
			res []store.MutationResult
			err error
		}
		done := make(chan answer, 1)
		go func() {
			res, err := s.RunApply(ctx, []store.Mutation{stepMutation(run, "s")})
			done <- answer{res, err}
		}()
		// Until the batch waits for the row the transaction holds.
		awaitLockWait(t, s, "%WITH m AS (%unnest($1::text[], $2::bigint[], $3::bigint[]%", c.name+": the step batch")
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		a := <-done
		if a.err != nil {
			t.Fatalf("%s: RunApply: %v", c.name, a.err)
		}
		got, err := s.RunGet(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := s.HistoryRead(ctx, run.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case c.applies && (a.res[0].Err != nil || got.LastSeq != run.LastSeq+1 || len(evs) != int(run.LastSeq)+1 ||
			!got.LeaseUntil.Equal(extended)):
			t.Errorf("%s: want the step applied and the new lease kept; got err %v, last seq %d (was %d), %d events, lease until %v",
				c.name, a.res[0].Err, got.LastSeq, run.LastSeq, len(evs), got.LeaseUntil)
		case !c.applies && (!jobs.HasCode(a.res[0].Err, jobs.CodeJobLeaseLost) || got.LastSeq != run.LastSeq ||
			len(evs) != int(run.LastSeq)):
			t.Errorf("%s: want X_JOB_LEASE_LOST and nothing appended; got err %v, last seq %d (was %d), %d events",
				c.name, a.res[0].Err, got.LastSeq, run.LastSeq, len(evs))
		}
	}
}

// awaitLockWait returns once a statement of s's schema whose text is like pattern waits for a
// lock, and fails the test if none does within 10 s. Only the start of a statement's text is
// kept by pg_stat_activity (track_activity_query_size), so pattern must match that.
func awaitLockWait(t *testing.T, s *Store, pattern, who string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var waiting int
		if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%' AND query LIKE $2`,
			s.schema, pattern).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never waited for a lock", who)
		}
	}
}
