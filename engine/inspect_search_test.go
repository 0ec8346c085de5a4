package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

func enqueue(t *testing.T, env *testenv.Env, job, queue, key string) string {
	t.Helper()
	res, err := env.Engine.Enqueue(context.Background(), jobs.EnqueueRequest{Job: job, Queue: queue, Key: key, NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	return res.RunID
}

func TestSearchRuns(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		var ids []string // oldest first
		// Ids are time-ordered to the millisecond: each run is created a millisecond apart.
		for i := range 7 {
			ids = append(ids, enqueue(t, env, fmt.Sprintf("job%d", i%2), "q", fmt.Sprintf("k%d", i)))
			env.Advance(time.Millisecond)
		}
		if _, err := env.Engine.Cancel(ctx, ids[2], "test"); err != nil {
			t.Fatal(err)
		}
		// A second run with key k2 (the first was cancelled, so the key is free again).
		again := enqueue(t, env, "job0", "q", "k2")

		// Pages of 3, newest first, each page's Next the Before of the next; 8 runs in all.
		var seen []string
		f := engine.RunFilter{Limit: 3}
		for {
			p, err := env.Engine.SearchRuns(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Runs {
				seen = append(seen, r.ID)
			}
			if p.Next == "" {
				break
			}
			f.Before = p.Next
		}
		want := append([]string{again}, reverse(ids)...)
		if fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Errorf("pages = %v, want %v", seen, want)
		}

		check := func(f engine.RunFilter, want ...string) {
			t.Helper()
			p, err := env.Engine.SearchRuns(ctx, f)
			if err != nil {
				t.Fatalf("SearchRuns(%+v): %v", f, err)
			}
			var got []string
			for _, r := range p.Runs {
				got = append(got, r.ID)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("SearchRuns(%+v) = %v, want %v", f, got, want)
			}
		}
		check(engine.RunFilter{Search: ids[4]}, ids[4])                            // by id
		check(engine.RunFilter{Search: "k2"}, again, ids[2])                       // by key, newest first
		check(engine.RunFilter{Search: "k2", State: store.StateCancelled}, ids[2]) // within a filter
		check(engine.RunFilter{Search: ids[4], State: store.StateCancelled})       // an id outside the filter
		check(engine.RunFilter{Job: "job1"}, ids[5], ids[3], ids[1])               // by job
		check(engine.RunFilter{State: store.StateCancelled, Queue: "q"}, ids[2])   // by state and queue
		now := env.Clock.Now()
		check(engine.RunFilter{CreatedFrom: now.Add(time.Second)})                // nothing created later
		check(engine.RunFilter{CreatedTo: now.Add(time.Second), Limit: 1}, again) // created by now

		for _, bad := range []engine.RunFilter{
			{State: "bogus"}, {Limit: -1}, {Limit: engine.MaxSearchPage + 1}, {Search: "a\x00b"}, {Job: "\xff"},
			{CreatedFrom: now, CreatedTo: now},
		} {
			if _, err := env.Engine.SearchRuns(ctx, bad); jobs.CodeOf(err) != jobs.CodeBadRequest {
				t.Errorf("SearchRuns(%+v): %v, want X_BAD_REQUEST", bad, err)
			}
		}
	})
}

func reverse(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func TestInspectOverview(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		var ids []string
		for i := range 5 {
			ids = append(ids, enqueue(t, env, "j", "payments", fmt.Sprintf("k%d", i)))
		}
		enqueue(t, env, "j", "emails", "e1")
		env.Advance(time.Minute) // 09:01
		if _, err := env.Engine.Cancel(ctx, ids[0], "test"); err != nil {
			t.Fatal(err)
		}
		env.Advance(time.Minute + 30*time.Second) // 09:02:30
		for _, id := range ids[1:3] {
			if _, err := env.Engine.Cancel(ctx, id, "test"); err != nil {
				t.Fatal(err)
			}
		}
		ov, err := env.Engine.InspectOverview(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ov.Queues) != 2 || ov.Queues[0].Queue != "emails" || ov.Queues[1].Queue != "payments" {
			t.Fatalf("queues %+v, want emails and payments", ov.Queues)
		}
		p := ov.Queues[1]
		if p.Counts[store.StateReady] != 2 || p.Counts[store.StateCancelled] != 3 {
			t.Errorf("payments counts %v", p.Counts)
		}
		// The window is the 15 minutes ending with the current minute: 08:48–09:03.
		if want := time.Date(2026, 1, 5, 8, 48, 0, 0, time.UTC); !p.Since.Equal(want) || len(p.Finished) != 15 {
			t.Errorf("since %s with %d buckets, want %s with 15", p.Since, len(p.Finished), want)
		}
		if p.Finished[13].Cancelled != 1 || p.Finished[14].Cancelled != 2 || p.Window["cancelled"] != 3 {
			t.Errorf("buckets %+v, window %v", p.Finished, p.Window)
		}
		if p.PerMinute != 0.2 {
			t.Errorf("per minute %v, want 0.2 (3 in 15 minutes)", p.PerMinute)
		}
		if p.OldestReadySeconds != 150 {
			t.Errorf("oldest ready %vs, want 150s", p.OldestReadySeconds)
		}
		if ov.Totals["ready"] != 3 || ov.Totals["cancelled"] != 3 {
			t.Errorf("totals %v", ov.Totals)
		}
		if _, err := env.Engine.InspectOverview(ctx, time.Minute, time.Hour); jobs.CodeOf(err) != jobs.CodeBadRequest {
			t.Errorf("a window shorter than its bucket: %v", err)
		}
	})
}
