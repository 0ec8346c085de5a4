package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

func bulkCopyParams(from, n int, at time.Time) []store.CreateRunParams {
	ps := make([]store.CreateRunParams, n)
	for i := range ps {
		id := fmt.Sprintf("r%06d", from+i)
		ps[i] = store.CreateRunParams{
			Run: store.Run{ID: id, Job: "j", Queue: "q", Key: "k" + id, State: store.StateReady,
				Attempt: 1, ReadyAt: at, CreatedAt: at},
			Started: history.Event{Kind: history.KindRunStarted, At: at, Data: []byte(id)},
		}
	}
	return ps
}

// A bulk create inside a caller's transaction that meets a held key falls back from the COPY
// under a savepoint to the staging path: the caller's own write before it, and its transaction,
// survive the failed COPY, and what commits is the caller's row, the new runs and no second run
// of the held key.
func TestBulkCopyFallbackKeepsCallersTransaction(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{})
	ctx := context.Background()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	held := bulkCopyParams(0, 1, at)
	if _, err := s.RunCreate(ctx, held); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tbl := pgx.Identifier{s.schema, "app_rows"}.Sanitize()
	if _, err := conn.Exec(ctx, `CREATE TABLE `+tbl+` (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	for _, withHeld := range []bool{false, true} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		from := 1000
		if withHeld {
			from = 2000
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+tbl+` VALUES ($1)`, from); err != nil {
			t.Fatal(err)
		}
		ps := bulkCopyParams(from, 100, at)
		if withHeld {
			ps[50].Run.Key = held[0].Run.Key
		}
		res, err := s.CreateBulkInTx(ctx, tx, ps)
		if err != nil {
			t.Fatalf("withHeld=%v: %v", withHeld, err)
		}
		// The caller's transaction is usable after the call, and its writes commit with the runs.
		if _, err := tx.Exec(ctx, `INSERT INTO `+tbl+` VALUES ($1)`, from+1); err != nil {
			t.Fatalf("withHeld=%v: the caller's transaction after the call: %v", withHeld, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			deduped := withHeld && i == 50
			if r.Deduped != deduped {
				t.Errorf("withHeld=%v item %d: Deduped %v", withHeld, i, r.Deduped)
			}
			if deduped && r.Run.ID != held[0].Run.ID {
				t.Errorf("withHeld=%v item %d: deduped onto %s, want %s", withHeld, i, r.Run.ID, held[0].Run.ID)
			}
		}
		var runs, events, rows int
		if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+pgx.Identifier{s.schema, "runs"}.Sanitize()+` WHERE id >= $1 AND id < $2),
			(SELECT count(*) FROM `+pgx.Identifier{s.schema, "history"}.Sanitize()+` WHERE run_id >= $1 AND run_id < $2),
			(SELECT count(*) FROM `+tbl+` WHERE id IN ($3, $4))`,
			fmt.Sprintf("r%06d", from), fmt.Sprintf("r%06d", from+100), from, from+1).Scan(&runs, &events, &rows); err != nil {
			t.Fatal(err)
		}
		want := 100
		if withHeld {
			want = 99
		}
		if runs != want || events != want || rows != 2 {
			t.Errorf("withHeld=%v: %d runs, %d RunStarted, %d caller rows; want %d, %d, 2", withHeld, runs, events, rows, want, want)
		}
	}
}

// The fast path writes runs and history in binary COPY rows of its own encoding (bulk_encode.go):
// every field reads back as RunCreate stores it, times truncated to the microsecond on either
// side of both epochs (1970 and Postgres's 2000), a nil input as NULL and an empty one as empty,
// and text as written.
func TestBulkCopyEncodesAsRunCreate(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{})
	ctx := context.Background()
	times := []time.Time{
		time.Date(1969, 12, 31, 23, 59, 59, 999_999_500, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 123_456_789, time.FixedZone("x", -7*3600)),
		time.Date(2000, 1, 1, 0, 0, 0, 1_999, time.UTC),
		time.Date(2026, 5, 6, 7, 8, 9, 987_654_321, time.UTC),
	}
	ps := bulkCopyParams(0, 2*bulkMin, times[0])
	for i := range ps {
		at := times[i%len(times)]
		r := &ps[i].Run
		r.ReadyAt, r.CreatedAt = at.Add(time.Duration(i)*time.Hour), at
		r.Tenant, r.NoTenant, r.EnqueuedBy = fmt.Sprintf("té%d", i%3), i%2 == 0, "by ✓"
		r.Priority, r.Attempt = i%5-2, 1+i%2
		r.TraceParent, r.TraceState = fmt.Sprint("tp", i), fmt.Sprint("ts", i)
		switch i % 3 {
		case 0:
			r.Input = nil
		case 1:
			r.Input = []byte{}
		default:
			r.Input = []byte{0x92, 0x01, byte(i)}
		}
		ps[i].Started = history.Event{Kind: history.KindRunStarted, Name: fmt.Sprint("n", i), At: at.Add(time.Minute), Data: r.Input}
	}
	if _, err := s.RunCreateBulk(ctx, ps); err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		got, err := s.RunGet(ctx, p.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		w := p.Run
		if !got.ReadyAt.Equal(pgTime(w.ReadyAt)) || !got.CreatedAt.Equal(pgTime(w.CreatedAt)) ||
			!got.UpdatedAt.Equal(pgTime(w.CreatedAt)) || got.Tenant != w.Tenant || got.NoTenant != w.NoTenant ||
			got.EnqueuedBy != w.EnqueuedBy || got.Priority != w.Priority || got.Attempt != w.Attempt ||
			got.TraceParent != w.TraceParent || got.TraceState != w.TraceState || got.LastSeq != 1 ||
			(got.Input == nil) != (w.Input == nil) || string(got.Input) != string(w.Input) || got.State != w.State {
			t.Fatalf("item %d: stored %+v, created %+v", i, got, w)
		}
		evs, err := s.HistoryRead(ctx, p.Run.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		e := p.Started
		if len(evs) != 1 || evs[0].Seq != 1 || evs[0].Kind != e.Kind || evs[0].Name != e.Name ||
			!evs[0].At.Equal(pgTime(e.At)) || (evs[0].Data == nil) != (e.Data == nil) || string(evs[0].Data) != string(e.Data) {
			t.Fatalf("item %d: history %+v, want %+v", i, evs, e)
		}
	}
}
