package postgres

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// impliedParams is a run whose RunStarted is exactly what its row implies, as the engine makes
// them: same fields, same time.
func impliedParams(n int, at time.Time) store.CreateRunParams {
	r := store.Run{ID: runID(n), Job: "job", Queue: "q", Key: fmt.Sprintf("key-%d", n), Tenant: "acme",
		EnqueuedBy: "api", State: store.StateReady, Attempt: 1, ReadyAt: at, CreatedAt: at,
		Input: []byte{0x81, 0xa1, 'n', byte(n % 100)}}
	return store.CreateRunParams{Run: r, Started: history.New(at, history.RunStarted{Job: r.Job,
		Queue: r.Queue, Input: r.Input, Key: r.Key, Tenant: r.Tenant, EnqueuedBy: r.EnqueuedBy})}
}

// historyRows counts a run's stored history rows at seq 1.
func historyRowsAtOne(t *testing.T, s *Store, id string) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), s.render(`SELECT count(*) FROM {S}.history WHERE run_id = $1 AND seq = 1`), id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A created run whose RunStarted its row implies gets no history row for it, on the single
// create, the bulk COPY path and the bulk staging path alike; HistoryRead gives back the very
// event the create was handed, whatever the offset and limit. An event the row does not imply
// (another time, other fields) is written and read back as given.
func TestRunStartedLivesInTheRow(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{})
	ctx := context.Background()
	at := time.Date(2026, 3, 4, 5, 6, 7, 891234567, time.UTC) // nanoseconds: kept to the microsecond
	single := impliedParams(1, at)
	if _, err := s.RunCreate(ctx, []store.CreateRunParams{single}); err != nil {
		t.Fatal(err)
	}
	var bulk []store.CreateRunParams
	for n := 10; n < 20; n++ {
		bulk = append(bulk, impliedParams(n, at))
	}
	if _, err := s.RunCreateBulk(ctx, bulk); err != nil {
		t.Fatal(err)
	}
	// A bulk create meeting a held key takes the staging path.
	staged := []store.CreateRunParams{impliedParams(30, at), impliedParams(31, at)}
	staged[1].Run.Key = single.Run.Key
	staged[1].Started = history.New(at, history.RunStarted{Job: "job", Queue: "q", Input: staged[1].Run.Input,
		Key: single.Run.Key, Tenant: "acme", EnqueuedBy: "api"})
	if _, err := s.RunCreateBulk(ctx, staged); err != nil {
		t.Fatal(err)
	}
	// Not implied: a later time, a field the row does not hold.
	later := impliedParams(40, at)
	later.Started.At = at.Add(time.Second)
	other := impliedParams(41, at)
	other.Started = history.New(at, history.RunStarted{Job: "job", Queue: "elsewhere", Input: other.Run.Input, Key: other.Run.Key})
	if _, err := s.RunCreate(ctx, []store.CreateRunParams{later, other}); err != nil {
		t.Fatal(err)
	}

	check := func(p store.CreateRunParams, stored int) {
		t.Helper()
		id := p.Run.ID
		if got := historyRowsAtOne(t, s, id); got != stored {
			t.Errorf("%s: %d history rows at seq 1, want %d", id, got, stored)
		}
		want := p.Started
		want.Seq, want.At = 1, want.At.Truncate(time.Microsecond)
		for _, lim := range []int{0, 1, 5} {
			evs, err := s.HistoryRead(ctx, id, 0, lim)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 1 || !reflect.DeepEqual(evs[0], want) {
				t.Errorf("%s limit %d: read %+v, want [%+v]", id, lim, evs, want)
			}
		}
		if evs, err := s.HistoryRead(ctx, id, 1, 0); err != nil || len(evs) != 0 {
			t.Errorf("%s after seq 1: %v, %v", id, evs, err)
		}
	}
	check(single, 0)
	for _, p := range bulk {
		check(p, 0)
	}
	check(staged[0], 0)
	check(later, 1)
	check(other, 1)

	// With later events: seq 1 comes first, then the stored rows, within the limit.
	claimed, err := s.RunClaim(ctx, store.ClaimParams{WorkerID: "w", Queues: []string{"q"}, Limit: 100,
		Now: at, LeaseUntil: at.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range claimed {
		if r.ID == single.Run.ID {
			m := stepMutation(r, "a")
			m.Events = append(m.Events, history.New(t0, history.StepCompleted{StepName: "b"}))
			applyAll(t, s, []store.Mutation{m})
		}
	}
	evs, err := s.HistoryRead(ctx, single.Run.ID, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Seq != 1 || evs[0].Kind != history.KindRunStarted || evs[1].Seq != 2 {
		t.Fatalf("first two events: %+v", evs)
	}
	if evs, _ := s.HistoryRead(ctx, single.Run.ID, 0, 0); len(evs) != 3 || evs[2].Seq != 3 {
		t.Fatalf("whole history: %+v", evs)
	}
}

// A run created before RunStarted could live in the row has its history row: it is read as
// stored and not rebuilt beside it.
func TestStoredRunStartedIsReadAsStored(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{})
	ctx := context.Background()
	p := impliedParams(1, t0)
	if _, err := s.RunCreate(ctx, []store.CreateRunParams{p}); err != nil {
		t.Fatal(err)
	}
	// As the older store wrote it; data that differs from what the row implies shows which one
	// a read returns.
	if _, err := s.pool.Exec(ctx, s.render(`INSERT INTO {S}.history (run_id, seq, kind, name, at, data) VALUES ($1, 1, 'RunStarted', '', $2, '\x80')`), p.Run.ID, t0); err != nil {
		t.Fatal(err)
	}
	evs, err := s.HistoryRead(ctx, p.Run.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || string(evs[0].Data) != "\x80" {
		t.Fatalf("read %+v, want the stored row alone", evs)
	}
}

// A completion whose RunCompleted the completed row implies writes no history row for it; every
// read of the history (any offset, any limit) gives the events the batch was answered with, the
// rebuilt first and last among them. A RunCompleted the row does not imply (another time, an
// empty result) is written.
func TestRunCompletedLivesInTheRow(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{})
	ctx := context.Background()
	at := time.Date(2026, 3, 4, 5, 6, 7, 891234567, time.UTC)
	var ps []store.CreateRunParams
	for n := 1; n <= 4; n++ {
		ps = append(ps, impliedParams(n, at))
	}
	if _, err := s.RunCreate(ctx, ps); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.RunClaim(ctx, store.ClaimParams{WorkerID: "w", Queues: []string{"q"}, Limit: 10,
		Now: at, LeaseUntil: at.Add(time.Minute)})
	if err != nil || len(claimed) != 4 {
		t.Fatalf("claimed %d runs: %v", len(claimed), err)
	}
	done := at.Add(1500 * time.Millisecond)
	complete := func(r store.Run, steps int, result []byte, eventAt time.Time) store.Mutation {
		m := store.Mutation{RunID: r.ID, Fence: r.Fence, Now: done}
		for i := range steps {
			m.Events = append(m.Events, history.New(done, history.StepCompleted{StepName: fmt.Sprint("s", i), Output: []byte{0xc0}}))
		}
		m.Events = append(m.Events, history.New(eventAt, history.RunCompleted{Result: result}))
		m.State, m.Result = store.StateCompleted, result
		return m
	}
	byID := map[string]store.Run{}
	for _, r := range claimed {
		byID[r.ID] = r
	}
	ms := []store.Mutation{
		complete(byID[runID(1)], 0, []byte{0x2a}, done),                // the no-op job's shape
		complete(byID[runID(2)], 3, []byte{0xa2, 'o', 'k'}, done),      // after steps
		complete(byID[runID(3)], 1, []byte{0x2a}, done.Add(time.Hour)), // another time: written
		complete(byID[runID(4)], 1, nil, done),                         // no result: written
	}
	res := applyAll(t, s, ms)
	for i, want := range []int{0, 0, 1, 1} {
		id := ms[i].RunID
		r := res[i]
		if r.Err != nil {
			t.Fatalf("%s: %v", id, r.Err)
		}
		var rows int
		if err := s.pool.QueryRow(ctx, s.render(`SELECT count(*) FROM {S}.history WHERE run_id = $1 AND seq = $2`), id, r.Run.LastSeq).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != want {
			t.Errorf("%s: %d history rows at its last seq %d, want %d", id, rows, r.Run.LastSeq, want)
		}
		whole := append([]history.Event{}, ps[i].Started)
		whole[0].Seq, whole[0].At = 1, whole[0].At.Truncate(time.Microsecond)
		whole = append(whole, r.Appended...)
		if last := whole[len(whole)-1]; last.Seq != r.Run.LastSeq || last.Kind != history.KindRunCompleted {
			t.Fatalf("%s: answered %+v", id, r.Appended)
		}
		for after := int64(0); after <= r.Run.LastSeq; after++ {
			for _, lim := range []int{0, 1, 2, 3, 10} {
				got, err := s.HistoryRead(ctx, id, after, lim)
				if err != nil {
					t.Fatal(err)
				}
				want := whole[after:]
				if lim > 0 && len(want) > lim {
					want = want[:lim]
				}
				if len(got) == 0 && len(want) == 0 {
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s after %d limit %d:\n got %+v\nwant %+v", id, after, lim, got, want)
				}
			}
		}
	}
}

// With WriteImpliedEvents (a rolling upgrade from a version that cannot rebuild them) both
// events are written as rows, and the history reads the same.
func TestWriteImpliedEventsWritesThem(t *testing.T) {
	t.Parallel()
	s := OpenTest(t, Config{WriteImpliedEvents: true})
	ctx := context.Background()
	p := impliedParams(1, t0)
	if _, err := s.RunCreate(ctx, []store.CreateRunParams{p}); err != nil {
		t.Fatal(err)
	}
	bulk := []store.CreateRunParams{impliedParams(2, t0)}
	if _, err := s.RunCreateBulk(ctx, bulk); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.RunClaim(ctx, store.ClaimParams{WorkerID: "w", Queues: []string{"q"}, Limit: 10,
		Now: t0, LeaseUntil: t0.Add(time.Minute)})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claimed %d: %v", len(claimed), err)
	}
	var ms []store.Mutation
	for _, r := range claimed {
		m := store.Mutation{RunID: r.ID, Fence: r.Fence, Now: t0,
			Events: []history.Event{history.New(t0, history.RunCompleted{Result: []byte{0x2a}})}}
		m.State, m.Result = store.StateCompleted, []byte{0x2a}
		ms = append(ms, m)
	}
	applyAll(t, s, ms)
	for _, id := range []string{runID(1), runID(2)} {
		var rows int
		if err := s.pool.QueryRow(ctx, s.render(`SELECT count(*) FROM {S}.history WHERE run_id = $1`), id).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		evs, err := s.HistoryRead(ctx, id, 0, 0)
		if rows != 2 || err != nil || len(evs) != 2 || evs[0].Kind != history.KindRunStarted || evs[1].Kind != history.KindRunCompleted {
			t.Errorf("%s: %d rows stored, read %+v, %v", id, rows, evs, err)
		}
	}
}
