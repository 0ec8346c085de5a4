package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/ultimat3/jobs/store"
)

// pass is a fresh ledger row of run n, named name, started at base+n s.
func pass(n int, name string) store.Backfill {
	started := at(time.Duration(n) * time.Second)
	return store.Backfill{RunID: runID(n), Name: name, Checksum: "sum-" + name, AppVersion: "v1", Total: -1,
		StartedAt: started, UpdatedAt: started}
}

func openPass(t *testing.T, s store.Store, b store.Backfill) (store.Backfill, bool) {
	t.Helper()
	row, adopted, err := s.BackfillOpen(t.Context(), b)
	if err != nil {
		t.Fatalf("BackfillOpen(%s): %v", b.RunID, err)
	}
	return row, adopted
}

func ledgerRow(t *testing.T, s store.Store, runID string) store.Backfill {
	t.Helper()
	rows, err := s.BackfillList(t.Context(), store.BackfillFilter{RunID: runID})
	if err != nil || len(rows) != 1 {
		t.Fatalf("BackfillList(run %s) = %d rows, %v; want 1", runID, len(rows), err)
	}
	return rows[0]
}

func progress(n int, rows, batches int64, cursor string, d time.Duration) store.BackfillProgress {
	return store.BackfillProgress{RunID: runID(n), Rows: rows, Batches: batches, Cursor: cursor, Now: at(d)}
}

// backfillTests is the ledger's suite: a pass's row, its tenant, a rewind, the newest passes.
var backfillTests = slices.Concat(backfillPassTests, backfillTenantTests, backfillRewindTests, backfillNewestTests)

var backfillPassTests = []test{
	{"OpenInsertsARunningRow", func(t *testing.T, s store.Store) {
		b := pass(1, "slugs")
		b.Total = 40
		row, adopted := openPass(t, s, b)
		if adopted || row.Status != store.BackfillRunning || row.Name != "slugs" || row.Checksum != "sum-slugs" ||
			row.AppVersion != "v1" || row.Total != 40 || !row.StartedAt.Equal(b.StartedAt) || !row.CompletedAt.IsZero() {
			t.Fatalf("opened row = %+v (adopted %v)", row, adopted)
		}
		if got := ledgerRow(t, s, runID(1)); got.Status != store.BackfillRunning || got.Total != 40 {
			t.Fatalf("listed row = %+v", got)
		}
	}},

	{"ARetryAdoptsItsOwnRow", func(t *testing.T, s store.Store) {
		openPass(t, s, pass(1, "slugs"))
		if err := s.BackfillUpdate(t.Context(), progress(1, 300, 3, `[300]`, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := s.BackfillFinish(t.Context(), store.BackfillFinish{BackfillProgress: progress(1, 300, 3, `[300]`, 11*time.Second),
			Status: store.BackfillFailed, Error: "boom"}); err != nil {
			t.Fatal(err)
		}
		if got := ledgerRow(t, s, runID(1)); got.Status != store.BackfillFailed || got.Error != "boom" {
			t.Fatalf("failed row = %+v", got)
		}
		// The next attempt opens at a later time: it adopts the row, started_at unmoved.
		later := pass(1, "slugs")
		later.StartedAt, later.UpdatedAt, later.Total = at(time.Minute), at(time.Minute), 900
		row, adopted := openPass(t, s, later)
		if !adopted || row.Status != store.BackfillRunning || row.Error != "" || !row.StartedAt.Equal(at(time.Second)) || row.Total != 900 ||
			row.Rows != 300 || row.Batches != 3 || row.Cursor != `[300]` {
			t.Fatalf("adopted row = %+v (adopted %v)", row, adopted)
		}
		rows, _ := s.BackfillList(t.Context(), store.BackfillFilter{Name: "slugs"})
		if len(rows) != 1 {
			t.Fatalf("a retry wrote %d rows; want its one", len(rows))
		}
	}},

	{"UpdateNeverRewinds", func(t *testing.T, s store.Store) {
		openPass(t, s, pass(1, "slugs"))
		for _, p := range []store.BackfillProgress{progress(1, 500, 5, `[5]`, 5*time.Second),
			progress(1, 300, 3, `[3]`, 6*time.Second), progress(1, 500, 5, `[5]`, 7*time.Second)} {
			if err := s.BackfillUpdate(t.Context(), p); err != nil {
				t.Fatal(err)
			}
		}
		if got := ledgerRow(t, s, runID(1)); got.Rows != 500 || got.Batches != 5 || got.Cursor != `[5]` {
			t.Fatalf("row after a late resend = %+v; want 500 rows, 5 batches", got)
		}
		// Progress of a run with no row is no error: the row is a report.
		if err := s.BackfillUpdate(t.Context(), progress(9, 1, 1, `[1]`, time.Second)); err != nil {
			t.Fatalf("update without a row: %v", err)
		}
	}},

	{"CompletedIsFinal", func(t *testing.T, s store.Store) {
		openPass(t, s, pass(1, "slugs"))
		done := store.BackfillFinish{BackfillProgress: progress(1, 700, 7, `[7]`, 20*time.Second), Status: store.BackfillCompleted}
		for range 2 { // a resend changes nothing
			if err := s.BackfillFinish(t.Context(), done); err != nil {
				t.Fatal(err)
			}
		}
		got := ledgerRow(t, s, runID(1))
		if got.Status != store.BackfillCompleted || got.Rows != 700 || !got.CompletedAt.Equal(at(20*time.Second)) {
			t.Fatalf("completed row = %+v", got)
		}
		if err := s.BackfillFinish(t.Context(), store.BackfillFinish{BackfillProgress: progress(1, 1, 1, `[1]`, 30*time.Second),
			Status: store.BackfillFailed, Error: "late"}); err != nil {
			t.Fatal(err)
		}
		if err := s.BackfillUpdate(t.Context(), progress(1, 900, 9, `[9]`, 31*time.Second)); err != nil {
			t.Fatal(err)
		}
		row, adopted := openPass(t, s, pass(1, "slugs"))
		if !adopted || row.Status != store.BackfillCompleted || row.Rows != 700 || row.Error != "" {
			t.Fatalf("reopened completed row = %+v (adopted %v); want it unchanged", row, adopted)
		}
		if got := ledgerRow(t, s, runID(1)); got.Status != store.BackfillCompleted || got.Rows != 700 || got.Error != "" {
			t.Fatalf("completed row after late writes = %+v", got)
		}
	}},

	{"ListFiltersAndOrders", func(t *testing.T, s store.Store) {
		openPass(t, s, pass(1, "a"))
		openPass(t, s, pass(2, "b"))
		openPass(t, s, pass(3, "a"))
		if err := s.BackfillFinish(t.Context(), store.BackfillFinish{BackfillProgress: progress(1, 1, 1, "", 5*time.Second),
			Status: store.BackfillCompleted}); err != nil {
			t.Fatal(err)
		}
		ids := func(f store.BackfillFilter) []string { return passIDs(t, s, f) }
		for _, c := range []struct {
			f    store.BackfillFilter
			want []string
		}{
			{store.BackfillFilter{}, []string{runID(3), runID(2), runID(1)}},
			{store.BackfillFilter{Name: "a"}, []string{runID(3), runID(1)}},
			{store.BackfillFilter{Name: "a", Status: store.BackfillCompleted}, []string{runID(1)}},
			{store.BackfillFilter{Status: store.BackfillRunning}, []string{runID(3), runID(2)}},
			{store.BackfillFilter{Limit: 1}, []string{runID(3)}},
			{store.BackfillFilter{Name: "none"}, nil},
		} {
			if got := ids(c.f); len(got) != len(c.want) || (len(got) > 0 && !equalStrings(got, c.want)) {
				t.Errorf("BackfillList(%+v) = %v; want %v", c.f, got, c.want)
			}
		}
	}},
}

// backfillRewindTests: a retry from an earlier page discards the pages recorded since, so the
// engine sets the adopted row back to the pages the replay keeps. Without Rewind the ledger never
// moves a row to fewer batches (a late resend must not), and the row kept the discarded sweep's
// counts to the end.
var backfillRewindTests = []test{
	{"ARewindSetsFewerBatches", func(t *testing.T, s store.Store) {
		openPass(t, s, pass(1, "slugs"))
		if err := s.BackfillUpdate(t.Context(), progress(1, 600, 6, `[600]`, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := s.BackfillFinish(t.Context(), store.BackfillFinish{BackfillProgress: progress(1, 600, 6, `[600]`, 11*time.Second),
			Status: store.BackfillFailed, Error: "stalled"}); err != nil {
			t.Fatal(err)
		}
		// A rewind of a row that is not running changes nothing: the open adopts it first.
		rewind := progress(1, 200, 2, `[200]`, 12*time.Second)
		rewind.Rewind = true
		if err := s.BackfillUpdate(t.Context(), rewind); err != nil {
			t.Fatal(err)
		}
		if got := ledgerRow(t, s, runID(1)); got.Batches != 6 || got.Status != store.BackfillFailed {
			t.Fatalf("a rewind of a failed row moved it: %+v", got)
		}
		later := pass(1, "slugs")
		later.StartedAt, later.UpdatedAt = at(time.Minute), at(time.Minute)
		openPass(t, s, later)
		rewind.Now = at(time.Minute)
		if err := s.BackfillUpdate(t.Context(), rewind); err != nil {
			t.Fatal(err)
		}
		if got := ledgerRow(t, s, runID(1)); got.Rows != 200 || got.Batches != 2 || got.Cursor != `[200]` ||
			!got.UpdatedAt.Equal(at(time.Minute)) || got.Status != store.BackfillRunning {
			t.Fatalf("rewound row = %+v; want 200 rows in 2 batches at [200]", got)
		}
		// From there the row moves on as before, and a plain late resend still cannot rewind it.
		for _, p := range []store.BackfillProgress{progress(1, 300, 3, `[300]`, 61*time.Second), progress(1, 200, 2, `[200]`, 62*time.Second)} {
			if err := s.BackfillUpdate(t.Context(), p); err != nil {
				t.Fatal(err)
			}
		}
		if got := ledgerRow(t, s, runID(1)); got.Rows != 300 || got.Batches != 3 {
			t.Fatalf("row after the rewind = %+v; want 300 rows in 3 batches", got)
		}
		if err := s.BackfillFinish(t.Context(), store.BackfillFinish{BackfillProgress: progress(1, 500, 5, `[500]`, 70*time.Second),
			Status: store.BackfillCompleted}); err != nil {
			t.Fatal(err)
		}
		// A completed row is final, rewind or not.
		rewind.Now = at(80 * time.Second)
		if err := s.BackfillUpdate(t.Context(), rewind); err != nil {
			t.Fatal(err)
		}
		if got := ledgerRow(t, s, runID(1)); got.Rows != 500 || got.Batches != 5 || got.Status != store.BackfillCompleted {
			t.Fatalf("completed row = %+v; want 500 rows in 5 batches, completed", got)
		}
	}},
}

// backfillNewestTests: the newest pass of each backfill (and tenant), read in the store. The
// pending report asks it per name: read among the newest 10,000 rows of every backfill together,
// a completed pass behind as many newer ones (a per-tenant sweep writes one per tenant) read
// pending.
var backfillNewestTests = []test{
	{"ListNewestOfEachScope", func(t *testing.T, s store.Store) {
		finish := func(n int, status string) {
			t.Helper()
			if err := s.BackfillFinish(t.Context(), store.BackfillFinish{BackfillProgress: progress(n, 1, 1, "", time.Hour),
				Status: status}); err != nil {
				t.Fatal(err)
			}
		}
		openPass(t, s, pass(1, "all"))                  // completed
		openPass(t, s, tenantPass(2, "orgs", "org-a"))  // completed
		openPass(t, s, tenantPass(3, "orgs", "org-b"))  // failed
		openPass(t, s, pass(4, "all"))                  // failed
		openPass(t, s, tenantPass(5, "orgs", "org-a"))  // running
		openPass(t, s, tenantPass(6, "other", "org-a")) // completed
		openPass(t, s, tenantPass(7, "orgs", "org-b"))  // completed
		openPass(t, s, pass(8, "orgs"))                 // running: no tenant, under a per-tenant name
		for n, status := range map[int]string{1: store.BackfillCompleted, 2: store.BackfillCompleted, 3: store.BackfillFailed,
			4: store.BackfillFailed, 6: store.BackfillCompleted, 7: store.BackfillCompleted} {
			finish(n, status)
		}
		ids := func(f store.BackfillFilter) []string { return passIDs(t, s, f) }
		for _, c := range []struct {
			f    store.BackfillFilter
			want []string
		}{
			{store.BackfillFilter{Newest: store.NewestPerTenant}, []string{runID(8), runID(7), runID(6), runID(5), runID(4)}},
			{store.BackfillFilter{Newest: store.NewestPerName}, []string{runID(8), runID(6), runID(4)}},
			{store.BackfillFilter{Newest: store.NewestPerTenant, Name: "orgs"}, []string{runID(8), runID(7), runID(5)}},
			{store.BackfillFilter{Newest: store.NewestPerTenant, Name: "orgs", Status: store.BackfillCompleted}, []string{runID(7), runID(2)}},
			{store.BackfillFilter{Newest: store.NewestPerName, Name: "orgs", Status: store.BackfillCompleted}, []string{runID(7)}},
			{store.BackfillFilter{Newest: store.NewestPerTenant, Name: "all", Status: store.BackfillCompleted}, []string{runID(1)}},
			{store.BackfillFilter{Newest: store.NewestPerTenant, Name: "orgs", Tenant: "org-a"}, []string{runID(5)}},
			{store.BackfillFilter{Newest: store.NewestPerTenant, Name: "orgs", NoTenant: true}, []string{runID(8)}},
			{store.BackfillFilter{Newest: store.NewestPerTenant, Tenant: "org-a"}, []string{runID(6), runID(5)}},
			{store.BackfillFilter{Newest: store.NewestPerTenant, Status: store.BackfillFailed}, []string{runID(4), runID(3)}},
			{store.BackfillFilter{Newest: store.NewestPerTenant, Limit: 2}, []string{runID(8), runID(7)}},
			{store.BackfillFilter{Newest: store.NewestPerTenant, Name: "none"}, nil},
			// Without Newest, every row, as before.
			{store.BackfillFilter{Name: "orgs", Tenant: "org-a"}, []string{runID(5), runID(2)}},
		} {
			if got := ids(c.f); !equalStrings(got, c.want) {
				t.Errorf("BackfillList(%+v) = %v; want %v", c.f, got, c.want)
			}
		}
		// The newest is by start, then run id: two passes started at the same instant.
		same := tenantPass(9, "ties", "org-a")
		twin := tenantPass(10, "ties", "org-a")
		twin.StartedAt, twin.UpdatedAt = same.StartedAt, same.UpdatedAt
		openPass(t, s, same)
		openPass(t, s, twin)
		if got := ids(store.BackfillFilter{Name: "ties", Newest: store.NewestPerTenant}); !equalStrings(got, []string{runID(10)}) {
			t.Errorf("the newest of two passes started at once = %v; want the higher run id, %s", got, runID(10))
		}
		if _, err := s.BackfillList(t.Context(), store.BackfillFilter{Newest: "everything"}); err == nil {
			t.Errorf("a Newest scope the store does not know was taken")
		}
	}},
}

// tenantPass is pass n of a per-tenant backfill, for tenant.
func tenantPass(n int, name, tenant string) store.Backfill {
	b := pass(n, name)
	b.Tenant = tenant
	return b
}

// backfillTenantTests: a per-tenant backfill keeps its ledger per (name, tenant), so one tenant's
// completed pass is not another tenant's. Without the tenant on the row (and the filter), the
// gate's question "has this completed?" could only be asked per name, and the second tenant's
// pass completed at once as skipped, its rows never handled.
var backfillTenantTests = []test{
	{"ARowKeepsItsTenant", func(t *testing.T, s store.Store) {
		row, _ := openPass(t, s, tenantPass(1, "orgs", "org-a"))
		if row.Tenant != "org-a" {
			t.Fatalf("opened row = %+v; want tenant org-a", row)
		}
		if got := ledgerRow(t, s, runID(1)); got.Tenant != "org-a" {
			t.Fatalf("listed row = %+v; want tenant org-a", got)
		}
		// A retry adopts the row; the tenant is the run's and never moves.
		again := tenantPass(1, "orgs", "org-b")
		again.StartedAt, again.UpdatedAt = at(time.Minute), at(time.Minute)
		if row, adopted := openPass(t, s, again); !adopted || row.Tenant != "org-a" {
			t.Fatalf("adopted row = %+v (adopted %v); want tenant org-a", row, adopted)
		}
		if row, _ := openPass(t, s, pass(2, "all")); row.Tenant != "" {
			t.Fatalf("a pass of no tenant = %+v", row)
		}
	}},

	{"ListFiltersByTenant", func(t *testing.T, s store.Store) {
		openPass(t, s, tenantPass(1, "orgs", "org-a"))
		openPass(t, s, tenantPass(2, "orgs", "org-b"))
		openPass(t, s, pass(3, "orgs")) // a pass of no tenant under the same name
		openPass(t, s, tenantPass(4, "other", "org-a"))
		if err := s.BackfillFinish(t.Context(), store.BackfillFinish{BackfillProgress: progress(1, 1, 1, "", 5*time.Second),
			Status: store.BackfillCompleted}); err != nil {
			t.Fatal(err)
		}
		ids := func(f store.BackfillFilter) []string { return passIDs(t, s, f) }
		for _, c := range []struct {
			f    store.BackfillFilter
			want []string
		}{
			{store.BackfillFilter{Name: "orgs"}, []string{runID(3), runID(2), runID(1)}},
			{store.BackfillFilter{Name: "orgs", Tenant: "org-a"}, []string{runID(1)}},
			{store.BackfillFilter{Name: "orgs", Tenant: "org-b"}, []string{runID(2)}},
			{store.BackfillFilter{Name: "orgs", NoTenant: true}, []string{runID(3)}},
			{store.BackfillFilter{Name: "orgs", Tenant: "org-a", NoTenant: true}, []string{runID(1)}}, // Tenant wins
			{store.BackfillFilter{Tenant: "org-a"}, []string{runID(4), runID(1)}},
			{store.BackfillFilter{NoTenant: true}, []string{runID(3)}},
			// The gate's question: the newest completed pass of (name, tenant).
			{store.BackfillFilter{Name: "orgs", Tenant: "org-a", Status: store.BackfillCompleted, Limit: 1}, []string{runID(1)}},
			{store.BackfillFilter{Name: "orgs", Tenant: "org-b", Status: store.BackfillCompleted, Limit: 1}, nil},
			{store.BackfillFilter{Name: "orgs", NoTenant: true, Status: store.BackfillCompleted, Limit: 1}, nil},
			{store.BackfillFilter{Name: "orgs", Tenant: "org-c"}, nil},
		} {
			if got := ids(c.f); !equalStrings(got, c.want) {
				t.Errorf("BackfillList(%+v) = %v; want %v", c.f, got, c.want)
			}
		}
	}},
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// passIDs lists the run ids of the ledger rows f selects, in the store's order.
func passIDs(t *testing.T, s store.Store, f store.BackfillFilter) []string {
	t.Helper()
	rows, err := s.BackfillList(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.RunID)
	}
	return out
}
