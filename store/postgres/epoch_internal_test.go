package postgres

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/pgcluster"
	"github.com/ultimat3/jobs/store"
)

// A claim that Postgres acknowledged and then lost in a crash leaves its run ready at the fence
// it had before; the next claim must not hand the lost claim's fence out again, and a write under
// the lost fence must be refused (epoch.go). The crash is real and the loss certain: the WAL
// writer is stopped while the claim commits (so its WAL stays in shared memory, as an
// asynchronous commit's does until the WAL writer writes it) and then killed, which makes the
// postmaster end every session and recover from the WAL on disk. A private cluster, because the
// crash ends every session of the server.
func TestClaimLostInACrashLeavesItsFenceBehind(t *testing.T) {
	testURL(t) // the suite's Postgres is provisioned (make test); without it this skips too
	if !pgcluster.Available() {
		t.Skip("no PostgreSQL binaries to start a private cluster with")
	}
	ctx := context.Background()
	pg, err := pgcluster.Start(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Remove()
	s, err := Open(ctx, Config{URL: pg.URL(), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// A run with a durable claim behind it, handed back: its fence is f, from a synchronous step.
	first := runningRuns(t, s, 1, 1, "q")[0]
	applyAll(t, s, []store.Mutation{stepMutation(first, "a")})
	back := stepMutation(first, "b")
	back.State, back.ReadyAt = store.StateReady, t0
	applyAll(t, s, []store.Mutation{back})

	var walWriter int
	if err := s.pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'`).Scan(&walWriter); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(walWriter, syscall.SIGSTOP); err != nil {
		t.Skipf("cannot signal the cluster's WAL writer: %v", err)
	}
	lost, err := s.RunClaim(ctx, store.ClaimParams{WorkerID: "w1", Queues: []string{"q"}, Limit: 1, Now: t0,
		LeaseUntil: t0.Add(time.Hour), StickyBefore: t0})
	if err != nil || len(lost) != 1 {
		_ = syscall.Kill(walWriter, syscall.SIGCONT)
		t.Fatalf("claim: %v, %v", lost, err)
	}
	if lost[0].Fence <= first.Fence {
		t.Errorf("claimed again at fence %d, not above %d", lost[0].Fence, first.Fence)
	}
	if err := syscall.Kill(walWriter, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	// The server recovers with a new WAL writer; the pool's connections are gone, and new ones
	// take new epochs. (A read before the postmaster has noticed the crash would still see the
	// claim in shared memory.)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var pid int
		err := s.pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'`).Scan(&pid)
		if err == nil && pid != walWriter {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not come back: %v\n%s", err, pg.ServerLog())
		}
	}
	s.pool.Reset() // any connection from before the crash is dead
	after, err := s.RunGet(ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.State != store.StateReady || after.Fence != first.Fence {
		t.Fatalf("after the crash: %s at fence %d; want the claim lost (ready at fence %d)\n%s", after.State, after.Fence, first.Fence, pg.ServerLog())
	}

	again, err := s.RunClaim(ctx, store.ClaimParams{WorkerID: "w2", Queues: []string{"q"}, Limit: 1, Now: t0,
		LeaseUntil: t0.Add(time.Hour), StickyBefore: t0})
	if err != nil || len(again) != 1 {
		t.Fatalf("claim after the crash: %v, %v", again, err)
	}
	if again[0].Fence <= lost[0].Fence {
		t.Fatalf("claim after the crash has fence %d; the lost claim had %d", again[0].Fence, lost[0].Fence)
	}
	// The worker that received the lost claim is refused; the new holder is not.
	stale := stepMutation(lost[0], "c")
	stale.AfterSeq = after.LastSeq
	res, err := s.RunApply(ctx, []store.Mutation{stale})
	if err != nil || !jobs.HasCode(res[0].Err, jobs.CodeJobLeaseLost) {
		t.Fatalf("a step under the lost claim's fence: %v, %v; want X_JOB_LEASE_LOST", res, err)
	}
	fresh := stepMutation(again[0], "c")
	fresh.AfterSeq = after.LastSeq
	applyAll(t, s, []store.Mutation{fresh})
}

// A claim commits asynchronously only on a session that holds a fence epoch. On a session that
// lost it (RESET ALL, as a pooler's reset does) the claim commits as the session commits anything
// and takes a fence above the stored epoch, and so above every fence any epoch has given.
func TestClaimCommitsAsynchronouslyOnlyWithAnEpoch(t *testing.T) {
	s := OpenTest(t, Config{})
	ctx := context.Background()
	runningRuns(t, s, 1, 1, "q") // the pool's connection has its epoch

	c, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn := c.Hijack() // its session settings are changed below: never back to the pool
	defer conn.Close(ctx)

	commitMode := func() string {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, s.render(sqlClaimFairSettings)); err != nil {
			t.Fatal(err)
		}
		var mode string
		if err := tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		return mode
	}
	var epoch int64
	if err := conn.QueryRow(ctx, "SELECT current_setting($1)::bigint", epochSetting(s.schema)).Scan(&epoch); err != nil {
		t.Fatal(err)
	}
	if epoch <= 0 {
		t.Fatalf("the session's epoch is %d", epoch)
	}
	if got := commitMode(); got != "off" {
		t.Errorf("a claim on a session with an epoch commits with synchronous_commit %q, want off", got)
	}

	if _, err := conn.Exec(ctx, "RESET ALL"); err != nil {
		t.Fatal(err)
	}
	if got := commitMode(); got != "on" {
		t.Errorf("a claim on a session without an epoch commits with synchronous_commit %q, want on", got)
	}
	if _, err := s.RunCreate(ctx, []store.CreateRunParams{newRun(2, "q2")}); err != nil {
		t.Fatal(err)
	}
	var stored int64
	if err := conn.QueryRow(ctx, "SELECT epoch FROM "+pgx.Identifier{s.schema}.Sanitize()+".fence_epoch").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, s.render(sqlClaimFair), []string{"q2"}, []string{"w"}, t0, 1, ts(t0.Add(time.Hour)), t0,
		[]string{""}, []bool{false})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := appendRuns(rows, nil)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	fence := claimed[0].Fence
	if fence < (stored+1)<<32 {
		t.Errorf("a claim without an epoch took fence %d, want at least the stored epoch %d plus one, << 32", fence, stored)
	}
}
