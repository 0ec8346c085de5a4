package backfill_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// A source whose full page names no cursor, or the cursor it was asked after, would have the pass
// read the same page for ever (a cursor of nil reads the first page again). The pass refuses
// both with X_INVARIANT on the first attempt, before handling the repeated page, with and
// without OverlapCheckpoints (where the next page is handled ahead, beside the checkpoint).
func TestACursorThatDoesNotMoveFailsThePass(t *testing.T) {
	t.Parallel()
	type source struct {
		page func(req backfill.PageRequest) ([]int, backfill.Cursor)
		// handled is the rows handled before the refusal.
		handled int
	}
	sources := map[string]source{
		"repeated": {func(backfill.PageRequest) ([]int, backfill.Cursor) {
			return []int{1, 2, 3}, backfill.Cursor{3} // the first page, for ever
		}, 3},
		// Refused on the first page: with no position to record, the pass cannot go on.
		"missing": {func(req backfill.PageRequest) ([]int, backfill.Cursor) {
			if req.After == nil {
				return []int{1, 2, 3}, nil
			}
			return nil, nil
		}, 0},
		// The cursor comes back with other Go types after the codec (an int8 for 3): it is
		// still the same position.
		"repeated as another type": {func(req backfill.PageRequest) ([]int, backfill.Cursor) {
			if req.After == nil {
				return []int{1, 2, 3}, backfill.Cursor{int32(3), "a"}
			}
			return []int{4, 5, 6}, backfill.Cursor{uint8(3), "a"}
		}, 3},
	}
	for name, c := range sources {
		for _, overlap := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s overlap=%v", name, overlap), func(t *testing.T) {
				t.Parallel()
				env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
				var mu sync.Mutex
				handled := 0
				src := backfill.SourceFunc[int](func(_ context.Context, req backfill.PageRequest) ([]int, backfill.Cursor, error) {
					rows, next := c.page(req)
					return rows, next, nil
				})
				opts := []backfill.Option{backfill.BatchSize(3), backfill.Rate(1e6), fastRetry}
				if overlap {
					opts = append(opts, backfill.OverlapCheckpoints())
				}
				b := backfill.MustDefine("stuck-"+strings.ReplaceAll(name, " ", "-"), backfill.AllTenants(), src,
					func(_ context.Context, bt backfill.Batch[int]) error {
						mu.Lock()
						defer mu.Unlock()
						handled += len(bt.Rows)
						return nil
					}, opts...)
				startWorker(env, "", b)
				res := enqueue(t, env, b, backfill.Input{})
				run := env.Await(res.RunID, store.StateFailed)
				if run.ErrorCode != string(jobs.CodeInvariant) || run.Attempt != 1 || !strings.Contains(run.Error, "cursor") {
					t.Fatalf("run = %s attempt %d (%s); want X_INVARIANT about the cursor on attempt 1", run.ErrorCode, run.Attempt, run.Error)
				}
				mu.Lock()
				defer mu.Unlock()
				if handled != c.handled {
					t.Fatalf("handled %d rows; want %d, the refused page never", handled, c.handled)
				}
			})
		}
	}
}

// A short page ends the pass, so it may name no cursor.
func TestAShortPageNeedsNoCursor(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
	src := backfill.SourceFunc[int](func(_ context.Context, req backfill.PageRequest) ([]int, backfill.Cursor, error) {
		return []int{1, 2}, nil, nil
	})
	b := backfill.MustDefine("short-no-cursor", backfill.AllTenants(), src, func(context.Context, backfill.Batch[int]) error { return nil },
		backfill.BatchSize(3), backfill.Rate(1e6))
	startWorker(env, "", b)
	res := enqueue(t, env, b, backfill.Input{})
	if out := result(t, b, env.Await(res.RunID, store.StateCompleted)); out.Rows != 2 || out.Batches != 1 {
		t.Fatalf("result = %+v; want the short page's 2 rows", out)
	}
}

type orgID string

// A source reads the cursor with the same Go types on its first attempt as after a resume: the
// checkpoint goes through msgpack, which keeps values but not their types (an int64 7 comes back
// an int8, a time loses its zone, a named string is a string), so a source asserting the type it
// returned broke only after a crash. The pass hands it the cursor as a resume reads it back,
// normalised (Cursor), live and replayed alike; a time in the zone it was returned in, which the
// checkpoint keeps beside the cursor.
func TestACursorHasTheSameTypesLiveAndResumed(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, env *testenv.Env) {
		at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("X", 3600))
		var mu sync.Mutex
		var seen [][]string
		src := backfill.SourceFunc[int](func(_ context.Context, req backfill.PageRequest) ([]int, backfill.Cursor, error) {
			mu.Lock()
			defer mu.Unlock()
			switch len(req.After) {
			case 0:
				return []int{1}, backfill.Cursor{int32(7), orgID("org-a"), at, uint8(3), float32(1.5), [4]byte{1, 2, 3, 4},
					int64(1) << 40, uint64(1) << 63, true}, nil
			case 9: // the second page: read once live, and once more after its handler failed
				var types []string
				for _, v := range req.After {
					types = append(types, fmt.Sprintf("%T(%v)", v, v))
				}
				seen = append(seen, types)
				return []int{2}, backfill.Cursor{int64(99)}, nil
			}
			return nil, nil, nil
		})
		failed := false
		handle := func(_ context.Context, bt backfill.Batch[int]) error {
			mu.Lock()
			defer mu.Unlock()
			if bt.Index == 1 && !failed { // its retry replays the first page from its checkpoint
				failed = true
				return fmt.Errorf("injected")
			}
			return nil
		}
		b := backfill.MustDefine("cursor-types", backfill.AllTenants(), src, handle, backfill.BatchSize(1), backfill.Rate(1e6), fastRetry)
		startWorker(env, "", b)
		res := enqueue(t, env, b, backfill.Input{})
		if run := env.Await(res.RunID, store.StateCompleted); run.Attempt != 2 {
			t.Fatalf("attempt %d; want the second page retried once", run.Attempt)
		}
		// The time keeps its zone (the checkpoint records it beside the cursor): a driver binding
		// it as text compares it in the zone the source returned it in.
		want := []string{"int64(7)", "string(org-a)", "time.Time(2026-03-01 12:00:00.123456789 +0100 X)", "int64(3)",
			"float64(1.5)", "[]uint8([1 2 3 4])", "int64(1099511627776)", "uint64(9223372036854775808)", "bool(true)"}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 2 || !reflect.DeepEqual(seen[0], want) || !reflect.DeepEqual(seen[1], want) {
			t.Fatalf("the second page read the cursor as\n live:    %v\n resumed: %v\nwant both %v", seen[0], seen[len(seen)-1], want)
		}
	})
}
