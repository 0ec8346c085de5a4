package backfill_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// A source whose key is a long text (a URL, an object-store path: up to 1,024 bytes in S3)
// returns a cursor whose JSON text is over 1,000 bytes. The engine refused every report of such a
// pass (the cursor went through jobs.ValidIdentifier, capped at 1,000 bytes), so its row read 0
// rows while it swept and was completed only by the reconciling read, still at 0 rows, with a
// warning in the result. The cursor is text for people: the pass and the engine cut it.
func TestALongCursorIsCutAndThePassReportsItsFigures(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, env *testenv.Env) {
		const n = 6
		prefix := strings.Repeat("€", 400) // 1,200 bytes: a cut must keep each rune whole
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("%s/%02d", prefix, i)
		}
		src := backfill.SourceFunc[string](func(_ context.Context, req backfill.PageRequest) ([]string, backfill.Cursor, error) {
			after := ""
			if req.After != nil {
				after = req.After[0].(string)
			}
			var out []string
			for _, k := range keys {
				if k > after && len(out) < req.Limit {
					out = append(out, k)
				}
			}
			if len(out) == 0 {
				return nil, nil, nil
			}
			return out, backfill.Cursor{out[len(out)-1]}, nil
		})
		var mu sync.Mutex
		var reported []backfill.Progress
		b := backfill.MustDefine("long-cursor", backfill.AllTenants(), src, func(ctx context.Context, bt backfill.Batch[string]) error {
			if bt.Index != 2 {
				return nil
			}
			// Mid-pass: the first page's report (sent beside the pages) lands.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				ps, err := env.Engine.InspectBackfills(ctx, store.BackfillFilter{Name: "long-cursor"})
				if err != nil {
					return err
				}
				if (len(ps) == 1 && ps[0].Rows > 0) || time.Now().After(deadline) {
					mu.Lock()
					reported = ps
					mu.Unlock()
					return nil
				}
			}
		}, backfill.BatchSize(2), backfill.Rate(1e6), fastRetry)
		startWorker(env, "", b)
		res := enqueue(t, env, b, backfill.Input{})
		out := result(t, b, env.Await(res.RunID, store.StateCompleted))
		if out.Rows != n || len(out.Warnings) != 0 {
			t.Fatalf("result = %+v; want %d rows and no warning", out, n)
		}
		rows := ledger(t, env, "long-cursor")
		if len(rows) != 1 {
			t.Fatalf("ledger holds %d rows", len(rows))
		}
		r := rows[0]
		if r.Status != backfill.StatusCompleted || r.Rows != n || r.Batches != out.Batches ||
			len(r.Cursor) > backfill.MaxCursorText || !strings.HasPrefix(r.Cursor, `["€€€`) || !strings.HasSuffix(r.Cursor, "€…") {
			t.Fatalf("row = %d rows, %d batches, %s, cursor %d bytes %.20q…; want %d rows, %d batches and the cursor cut to %d bytes",
				r.Rows, r.Batches, r.Status, len(r.Cursor), r.Cursor, n, out.Batches, backfill.MaxCursorText)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(reported) != 1 || reported[0].Rows < 2 || reported[0].Cursor == "" {
			t.Fatalf("mid-pass the row read %+v; want the first pages' progress", reported)
		}
	})
}

// A failed pass retried from an earlier page (RetryRequest.FromStep) discards the pages recorded
// since and sweeps them again. Its row was adopted with the discarded sweep's counts, and as the
// ledger never moves a row to fewer batches, the new sweep's progress was never shown and the
// completed row kept the old sweep's rows, batches and cursor, against the run's own result.
// The engine now sets the adopted row back to the pages the replay keeps.
func TestARetryFromAnEarlierPageRewindsTheRow(t *testing.T) {
	t.Parallel()
	for _, from := range []string{"batch:0", "batch:2"} {
		t.Run(from, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, env *testenv.Env) {
				tb := newTable(10)
				var mu sync.Mutex
				fixed := false
				var seenAtRetry []backfill.Progress
				name := "retry-from-" + strings.ReplaceAll(from, ":", "-")
				handle := func(ctx context.Context, bt backfill.Batch[row]) error {
					mu.Lock()
					ok := fixed
					if ok && seenAtRetry == nil {
						// The retry's first live page: the row reads the pages kept, not the
						// discarded sweep.
						seenAtRetry, _ = env.Engine.InspectBackfills(ctx, store.BackfillFilter{Name: name})
					}
					mu.Unlock()
					if ok || bt.Index < 2 {
						return tb.handle(ctx, bt)
					}
					// The first release's bug, from page 2 on: it fixes even ids only, so the
					// count still matches.
					tb.mu.Lock()
					defer tb.mu.Unlock()
					for _, r := range bt.Rows {
						if r.ID%2 == 0 {
							tb.rows[r.ID].Done = true
						}
					}
					return nil
				}
				b := backfill.MustDefine(name, backfill.AllTenants(), tb.source(), handle,
					backfill.BatchSize(2), backfill.Rate(1e6), backfill.Count(tb.left), fastRetry)
				startWorker(env, "", b)
				res := enqueue(t, env, b, backfill.Input{})
				if run := env.Await(res.RunID, store.StateFailed); run.ErrorCode != string(jobs.CodeBackfillStalled) {
					t.Fatalf("first sweep: %s %s", run.ErrorCode, run.Error)
				}
				first := ledger(t, env, name)[0]
				mu.Lock()
				fixed = true
				mu.Unlock()
				if _, err := env.Engine.Retry(context.Background(), engine.RetryRequest{RunID: res.RunID, FromStep: from, Reason: "fixed"}); err != nil {
					t.Fatal(err)
				}
				run := env.Await(res.RunID, store.StateCompleted, store.StateFailed)
				if run.State != store.StateCompleted {
					t.Fatalf("after the retry: %s %s", run.ErrorCode, run.Error)
				}
				out := result(t, b, run)
				r := ledger(t, env, name)[0]
				if r.Rows != out.Rows || r.Batches != out.Batches || r.Status != backfill.StatusCompleted {
					t.Fatalf("the completed row reads %d rows in %d batches (cursor %s, first sweep %d in %d); the run's result says %d rows in %d batches",
						r.Rows, r.Batches, r.Cursor, first.Rows, first.Batches, out.Rows, out.Batches)
				}
				mu.Lock()
				defer mu.Unlock()
				// From batch:2, pages 0 and 1 are kept (ids 1 to 4), and the retry's first
				// live page has not reported yet.
				want := map[string][2]int64{"batch:0": {0, 0}, "batch:2": {4, 2}}[from]
				if len(seenAtRetry) != 1 || seenAtRetry[0].Rows != want[0] || seenAtRetry[0].Batches != want[1] || first.Batches <= want[1] {
					t.Fatalf("at the retry's first live page the row read %+v (first sweep %d batches); want %d rows in %d batches",
						seenAtRetry, first.Batches, want[0], want[1])
				}
				if from == "batch:2" && seenAtRetry[0].Cursor != "[4]" {
					t.Fatalf("rewound cursor %q; want page 1's, [4]", seenAtRetry[0].Cursor)
				}
			})
		})
	}
}

// The passes in flight (`jobs ls`, the backfill_* gauges, the console's "Running now") were
// found among the newest 10,000 ledger rows only: a long pass that started before 10,000 shorter
// ones (a per-tenant sweep over many tenants) vanished from every in-flight view while it still
// ran. A status is now read in the store.
func TestARunningPassBehindTenThousandNewerRowsIsInFlight(t *testing.T) {
	t.Parallel()
	st := memory.New()
	env := testenv.Start(t, testenv.Options{Store: st})
	ctx := context.Background()
	in, err := jobs.Encode(backfill.Input{})
	if err != nil {
		t.Fatal(err)
	}
	live, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "long-pass", Input: in, Key: "long-pass", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	openPass(t, st, live.RunID, "long-pass", "", t0)
	fillLedger(t, st, "per-org", t0, 10_000)
	for _, status := range []string{backfill.StatusRunning, ""} {
		limit := map[string]int{backfill.StatusRunning: 0, "": 10_000}[status]
		ps, err := env.Engine.InspectBackfills(ctx, store.BackfillFilter{Status: status, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		var running []string
		for _, p := range ps {
			if p.Status == backfill.StatusRunning {
				running = append(running, p.RunID)
			}
		}
		if status == backfill.StatusRunning && (len(running) != 1 || running[0] != live.RunID) {
			t.Fatalf("passes in flight: %v; want the live pass %s", running, live.RunID)
		}
	}
	// A completed pass is read in the store too, behind as many newer ones.
	ps, err := env.Engine.InspectBackfills(ctx, store.BackfillFilter{Name: "per-org", Tenant: "org-00000", Status: backfill.StatusCompleted, Limit: 1})
	if err != nil || len(ps) != 1 || ps[0].RunID != "run-org-00000" {
		t.Fatalf("the oldest completed pass of org-00000: %+v, %v", ps, err)
	}
}

// The pending report (`backfill --pending`, `--all`, the console's board) read the newest 10,000
// ledger rows of every backfill together, while the ledger keeps every pass and a per-tenant
// backfill writes one per tenant: a backfill whose completed pass was older read pending, so
// `--pending` failed a deploy for a swept name and `--all --write` took it again (refused by the
// gate with X_BACKFILL_APPLIED). The report reads each declared name's passes on their own.
func TestPendingReadsEachNameBehindTenThousandNewerRows(t *testing.T) {
	t.Parallel()
	st := memory.New()
	old := backfill.Declaration{Kind: backfill.Kind, Name: "old-sweep", Checksum: "c1", Batch: 10, Rate: 5, Tenant: "none"}
	perTenant := backfill.Declaration{Kind: backfill.Kind, Name: "per-org", Checksum: "c2", Batch: 10, Rate: 5, Tenant: "input"}
	env := testenv.Start(t, testenv.Options{Store: st, Backfills: func(context.Context) ([]backfill.Declaration, error) {
		return []backfill.Declaration{old, perTenant}, nil
	}})
	ctx := context.Background()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	openPass(t, st, "run-old", old.Name, "", t0)
	finishPass(t, st, "run-old", store.BackfillCompleted, t0)
	// An orphan behind them all still reads orphaned.
	openPass(t, st, "run-gone", "removed-sweep", "", t0.Add(-time.Hour))
	finishPass(t, st, "run-gone", store.BackfillCompleted, t0)
	// org-00000's first pass completed; a later one failed: it stays completed.
	fillLedger(t, st, perTenant.Name, t0, 10_000)
	openPass(t, st, "run-org-00000-again", perTenant.Name, "org-00000", t0.Add(20_000*time.Second))
	finishPass(t, st, "run-org-00000-again", store.BackfillFailed, t0.Add(20_000*time.Second))
	rep, err := env.Engine.PendingBackfills(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.TenantState(old.Name, ""); s != backfill.StateCompleted || rep.Unswept() {
		t.Fatalf("%q, completed by run-old, reads %q behind 10,000 newer passes (pending: %v); want completed and nothing unswept",
			old.Name, s, rep.Pending)
	}
	for _, tenant := range []string{"org-00000", "org-05000", "org-09999"} {
		if s := rep.TenantState(perTenant.Name, tenant); s != backfill.StateCompleted {
			t.Fatalf("tenant %s reads %q; want completed", tenant, s)
		}
	}
	if len(rep.Orphaned) != 1 || rep.Orphaned[0] != "removed-sweep" {
		t.Fatalf("orphaned = %v; want removed-sweep", rep.Orphaned)
	}
	board, err := env.Engine.InspectBackfillBoard(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range board.Backfills {
		if line.Name == old.Name && (line.States[0].State != backfill.StateCompleted || line.Latest == nil || line.Latest.RunID != "run-old") {
			t.Fatalf("the board's %s line: %+v (latest %+v); want completed by run-old", old.Name, line.States, line.Latest)
		}
	}
	if len(board.Passes) != 100 {
		t.Fatalf("the board lists %d passes; want the newest 100", len(board.Passes))
	}
}

func openPass(t *testing.T, st store.Store, runID, name, tenant string, at time.Time) {
	t.Helper()
	if _, _, err := st.BackfillOpen(context.Background(), store.Backfill{RunID: runID, Name: name, Tenant: tenant, Checksum: "c",
		Total: -1, StartedAt: at, UpdatedAt: at}); err != nil {
		t.Fatal(err)
	}
}

func finishPass(t *testing.T, st store.Store, runID, status string, at time.Time) {
	t.Helper()
	if err := st.BackfillFinish(context.Background(), store.BackfillFinish{BackfillProgress: store.BackfillProgress{RunID: runID,
		Rows: 1, Batches: 1, Now: at}, Status: status}); err != nil {
		t.Fatal(err)
	}
}

// fillLedger writes n completed passes of the per-tenant backfill name, one per tenant
// (org-00000 …), each a second newer than the last, after t0.
func fillLedger(t *testing.T, st store.Store, name string, t0 time.Time, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("run-org-%05d", i)
		at := t0.Add(time.Duration(i+1) * time.Second)
		openPass(t, st, id, name, fmt.Sprintf("org-%05d", i), at)
		finishPass(t, st, id, store.BackfillCompleted, at)
	}
}
