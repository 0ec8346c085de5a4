package backfill_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/backfill/keyset"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// A keyset source over SQLite whose key is a time written in another zone than UTC. modernc's
// driver binds a time.Time as text in the value's own zone, and SQLite compares that text with
// the column's, so a cursor handed back in UTC (what msgpack gives back: an instant, no zone)
// is compared as text in the wrong zone and the rows between the two readings are skipped,
// silently: the pass completed having handled 4 of 8 rows. The checkpoint now keeps each time's
// zone beside the cursor, so the source is asked after the cursor as it returned it, on a live
// page and on a page replayed from its checkpoint after a retry alike.
func TestATimeKeyInAnotherZoneLosesNoRows(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, env *testenv.Env) {
		// _time_format=sqlite writes "2006-01-02 15:04:05.999999999-07:00", which the driver
		// parses back in a fixed zone of that offset.
		db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "app.db")+"?_time_format=sqlite")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`CREATE TABLE events (at DATETIME PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
		newYork := time.FixedZone("", -5*3600)
		const n = 8
		for i := 0; i < n; i++ {
			if _, err := db.Exec(`INSERT INTO events (at) VALUES ($1)`, time.Date(2024, 1, 1, 3+i, 0, 0, 0, newYork)); err != nil {
				t.Fatal(err)
			}
		}
		src := keyset.SQL(db, keyset.Query{Table: "events", Columns: []string{"at"}, Keys: []string{"at"}},
			func(scan func(...any) error) (time.Time, error) {
				var at time.Time
				return at, scan(&at)
			}, func(at time.Time) backfill.Cursor { return backfill.Cursor{at} })
		var mu sync.Mutex
		seen := map[time.Time]int{}
		var afters []string
		failed := false
		b := backfill.MustDefine("time-key-zone", backfill.AllTenants(), backfill.SourceFunc[time.Time](
			func(ctx context.Context, req backfill.PageRequest) ([]time.Time, backfill.Cursor, error) {
				if len(req.After) == 1 {
					mu.Lock()
					afters = append(afters, req.After[0].(time.Time).Format(time.RFC3339))
					mu.Unlock()
				}
				return src.Page(ctx, req)
			}), func(_ context.Context, bt backfill.Batch[time.Time]) error {
			mu.Lock()
			defer mu.Unlock()
			if bt.Index == 2 && !failed {
				// The retry replays pages 0 and 1 from their checkpoints and asks after page
				// 1's cursor as the checkpoint holds it.
				failed = true
				return context.DeadlineExceeded
			}
			for _, at := range bt.Rows {
				seen[at.UTC()]++
			}
			return nil
		}, backfill.BatchSize(2), backfill.Rate(1e6), fastRetry)
		startWorker(env, "", b)
		res := enqueue(t, env, b, backfill.Input{})
		run := env.Await(res.RunID, store.StateCompleted, store.StateFailed)
		out := result(t, b, run)
		mu.Lock()
		defer mu.Unlock()
		if run.State != store.StateCompleted || run.Attempt != 2 || len(seen) != n || out.Rows != n {
			t.Fatalf("the pass (%s, attempt %d, %s) handled %d of %d rows (result %d rows): %v",
				run.State, run.Attempt, run.Error, len(seen), n, out.Rows, seen)
		}
		for _, a := range afters {
			if !strings.HasSuffix(a, "-05:00") {
				t.Fatalf("the source was asked after %s; want the zone it returned the cursor in (-05:00): %v", a, afters)
			}
		}
		if rows := ledger(t, env, b.Declaration().Name); len(rows) != 1 || rows[0].Rows != n ||
			!strings.Contains(rows[0].Cursor, "-05:00") {
			t.Fatalf("ledger = %+v; want %d rows and the cursor in its zone", rows, n)
		}
	})
}
