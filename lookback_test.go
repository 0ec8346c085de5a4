package jobs_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// lookbackJob pauses a minute, then waits for plan.chosen of its org with the given lookback.
func lookbackJob(mode jobs.Lookback) *jobs.Job[orgInput, string] {
	return jobs.MustDefine("lookback-"+string(mode)+"x", func(in orgInput) string { return in.OrgID }, jobs.NoTenant[orgInput](),
		func(ctx *jobs.Ctx, in orgInput) (string, error) {
			if err := jobs.Sleep(ctx, "pause", time.Minute); err != nil {
				return "", err
			}
			p, ok, err := jobs.WaitForEvent[planChosen](ctx, "plan", "plan.chosen", jobs.Match{"orgId": in.OrgID}, time.Hour,
				jobs.WithLookback(mode))
			if err != nil || !ok {
				return "timeout", err
			}
			return p.Plan, nil
		})
}

// An event published before a run existed satisfies its wait through the default lookback; a
// since-run-start wait takes only the one published after the run started; a wait without
// lookback takes neither and wakes on the next publish. On every store.
func TestWaitLookbackModes(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		modes := []jobs.Lookback{jobs.LookbackWindow, jobs.LookbackSinceRunStart, jobs.LookbackNone}
		var defs []jobs.Definition
		for _, m := range modes {
			defs = append(defs, lookbackJob(m))
		}
		env.Worker(worker.Config{}, defs...)
		org := func(m jobs.Lookback) string { return "org-" + string(m) }
		publish := func(m jobs.Lookback, plan string) {
			t.Helper()
			if _, err := env.Engine.Publish(ctx, "plan.chosen", planChosen{OrgID: org(m), Plan: plan}); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range modes {
			publish(m, "before-the-run") // as if for an earlier run on the same key
		}
		env.Advance(30 * time.Second)
		runs := map[jobs.Lookback]string{}
		for _, m := range modes {
			res, err := lookbackJob(m).Enqueue(ctx, env.Engine, orgInput{OrgID: org(m)})
			if err != nil {
				t.Fatal(err)
			}
			runs[m] = res.RunID
			env.Await(res.RunID, store.StateSuspended)
		}
		env.Advance(10 * time.Second)
		for _, m := range modes {
			publish(m, "after-the-start") // while the run sleeps, before its wait
		}
		env.Advance(time.Minute)
		want := map[jobs.Lookback]string{jobs.LookbackWindow: "before-the-run", jobs.LookbackSinceRunStart: "after-the-start"}
		for m, plan := range want {
			run := env.Await(runs[m], store.StateCompleted)
			if got, _ := lookbackJob(m).Result(run.Result); got != plan {
				t.Errorf("lookback %q took %q, want %q", m, got, plan)
			}
		}
		// No lookback: the wait is registered and stays suspended until a new publish.
		id := runs[jobs.LookbackNone]
		deadline := time.Now().Add(10 * time.Second)
		for !slices.Contains(testenv.Kinds(env.History(id)), string(history.KindEventWaitStarted)+":plan") {
			if time.Now().After(deadline) {
				t.Fatalf("the wait was never registered: %v", testenv.Kinds(env.History(id)))
			}
			time.Sleep(5 * time.Millisecond)
		}
		if run := env.Await(id, store.StateSuspended, store.StateCompleted); run.State != store.StateSuspended {
			t.Fatalf("a wait without lookback took an earlier event: %s %s", run.State, run.Result)
		}
		publish(jobs.LookbackNone, "after-the-wait")
		run := env.Await(id, store.StateCompleted)
		if got, _ := lookbackJob(jobs.LookbackNone).Result(run.Result); got != "after-the-wait" {
			t.Errorf("lookback none took %q, want after-the-wait", got)
		}
	})
}

// An event whose payload has fields no wait could match on (a name holding a NUL, a long token)
// is published on every store, and a wait on its other fields receives it. Postgres refused the
// whole event (X_STORE_UNAVAILABLE, a 5xx over HTTP) where memory and SQLite took it: its fields
// are a text array under an index whose rows are bounded.
func TestAPayloadWithUnmatchableFieldsIsPublished(t *testing.T) {
	t.Parallel()
	token := make([]byte, 12_000) // incompressible, so no index row can hold it
	x := uint64(88172645463325252)
	for i := range token {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		token[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[x%36]
	}
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		paid := jobs.MustDefine("await-paid", func(id int) string { return fmt.Sprint(id) }, jobs.NoTenant[int](),
			func(c *jobs.Ctx, id int) (bool, error) {
				_, ok, err := jobs.WaitForEvent[map[string]any](c, "paid", "order.paid", jobs.Match{"orderId": id}, time.Hour)
				return ok, err
			})
		env.Worker(worker.Config{}, paid)
		id := enqueue(t, env, paid, 7)
		env.Await(id, store.StateSuspended)
		for i, payload := range []map[string]any{
			{"orderId": 8, "order\x00id": 1},
			{"orderId": 7, "signature": string(token)},
		} {
			if _, err := env.Engine.Publish(t.Context(), "order.paid", payload); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
		run := env.Await(id, store.StateCompleted)
		if ok, err := paid.Result(run.Result); err != nil || !ok {
			t.Fatalf("the wait's result: %v, %v; want the event received", ok, err)
		}
	})
}
