package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs/store"
)

// runs_ready, which only the oldest-first claim reads, is not built with the schema: a create
// writes no entry in it until an engine that claims oldest-first prepares it. PrepareOldestFirst
// builds it (the claim then reads it in order), does nothing the second time, and rebuilds an
// invalid one left by a failed build. The oldest-first claim is right either way (the store
// conformance suite claims oldest-first on a store never prepared).
func TestReadyIndexIsBuiltOnlyForOldestFirst(t *testing.T) {
	s := OpenTest(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	state := func() (found, valid bool) {
		t.Helper()
		found, valid, _, err := s.readyIndexState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return found, valid
	}
	if found, _ := state(); found {
		t.Fatal("runs_ready exists on a fresh schema; it should be built only for an oldest-first engine")
	}

	ps := make([]store.CreateRunParams, 2000)
	for i := range ps {
		ps[i] = newRun(i, "q")
	}
	if _, err := s.RunCreate(ctx, ps); err != nil {
		t.Fatal(err)
	}
	claim := func(limit int) []store.Run {
		t.Helper()
		runs, err := s.RunClaim(ctx, store.ClaimParams{WorkerID: "w", Queues: []string{"q"}, Limit: limit,
			Now: t0, LeaseUntil: t0.Add(time.Hour), StickyBefore: t0, OldestFirst: true})
		if err != nil || len(runs) != limit {
			t.Fatalf("RunClaim: %d runs, %v", len(runs), err)
		}
		return runs
	}
	if got := claim(2); got[0].ID != runID(0) || got[1].ID != runID(1) {
		t.Fatalf("oldest-first claim without the index took %s, %s; want the two oldest", got[0].ID, got[1].ID)
	}

	if err := s.PrepareOldestFirst(ctx); err != nil {
		t.Fatal(err)
	}
	if found, valid := state(); !found || !valid {
		t.Fatalf("after PrepareOldestFirst runs_ready found=%v valid=%v", found, valid)
	}
	if err := s.PrepareOldestFirst(ctx); err != nil {
		t.Fatalf("a second PrepareOldestFirst: %v", err)
	}
	if got := claim(2); got[0].ID != runID(2) || got[1].ID != runID(3) {
		t.Fatalf("oldest-first claim with the index took %s, %s; want the next two", got[0].ID, got[1].ID)
	}

	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "ANALYZE "+s.schema+".runs"); err != nil {
		t.Fatal(err)
	}
	plan, err := planText(ctx, conn, "EXPLAIN "+s.q(stmtRunClaim), []string{"q"}, []string{"w"}, t0, 4, t0.Add(time.Hour), t0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "runs_ready") {
		t.Fatalf("the oldest-first claim does not read runs_ready once it is built:\n%s", plan)
	}

	// A build that failed half-way leaves an invalid index, which no plan reads.
	if _, err := conn.Exec(ctx, `UPDATE pg_index SET indisvalid = false WHERE indexrelid = $1::regclass`,
		s.schema+".runs_ready"); err != nil {
		t.Fatal(err)
	}
	if found, valid := state(); !found || valid {
		t.Fatalf("runs_ready marked invalid: found=%v valid=%v", found, valid)
	}
	if err := s.PrepareOldestFirst(ctx); err != nil {
		t.Fatal(err)
	}
	if found, valid := state(); !found || !valid {
		t.Fatalf("PrepareOldestFirst left an invalid runs_ready: found=%v valid=%v", found, valid)
	}
}

// Two engines starting at once on one schema: both PrepareOldestFirst calls return, neither
// fails, and the index they leave is valid. One of them takes the builder's lock and builds it;
// the other finds the lock held and looks again until the index is valid.
func TestReadyIndexPreparedByTwoAtOnce(t *testing.T) {
	a := OpenTest(t, Config{})
	b := OpenTest(t, Config{Schema: a.schema})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ps := make([]store.CreateRunParams, 5000)
	for i := range ps {
		ps[i] = newRun(i, "q")
	}
	if _, err := a.RunCreateBulk(ctx, ps); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for _, s := range []*Store{a, b} {
		go func() { errs <- s.PrepareOldestFirst(ctx) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("PrepareOldestFirst beside another: %v", err)
		}
	}
	found, valid, building, err := b.readyIndexState(ctx)
	if err != nil || !found || !valid || building {
		t.Fatalf("runs_ready after two prepares: found=%v valid=%v building=%v err=%v", found, valid, building, err)
	}
}
