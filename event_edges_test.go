package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// A LookbackNone wait takes nothing published before its registration, on every store, even at
// the same instant of the (fake) clock: Postgres keeps microseconds, and "just past now" was a
// nanosecond, cut back to now there.
func TestLookbackNoneTakesNothingPublishedBeforeTheWait(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		gate := make(chan struct{})
		j := jobs.MustDefine("none-wait", func(in string) string { return in }, jobs.NoTenant[string](),
			func(c *jobs.Ctx, order string) (string, error) {
				if _, err := jobs.Step(c, "gate", func(context.Context) (int, error) { <-gate; return 1, nil }); err != nil {
					return "", err
				}
				p, ok, err := jobs.WaitForEvent[map[string]any](c, "paid", "none.paid", jobs.Match{"order": order}, time.Hour,
					jobs.WithLookback(jobs.LookbackNone))
				if err != nil || !ok {
					return "timeout", err
				}
				return p["n"].(string), nil
			})
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, "o-1")
		env.Await(id, store.StateRunning)
		if _, err := env.Engine.Publish(t.Context(), "none.paid", map[string]any{"order": "o-1", "n": "before"}); err != nil {
			t.Fatal(err)
		}
		close(gate) // the wait registers now, at the same clock instant as the publish
		run := env.Await(id, store.StateSuspended, store.StateCompleted)
		if run.State != store.StateSuspended {
			got, _ := j.Result(run.Result)
			t.Fatalf("a LookbackNone wait took the event published before it: %s, result %q (history %v)", run.State, got, testenv.Kinds(env.History(id)))
		}
	})
}

// A sleep does not wake before its wake time, on every store. Postgres keeps times to the
// microsecond: a due time cut down to it, compared with a now that keeps its nanoseconds, fired
// up to a microsecond early; it is rounded up instead.
func TestASleepNeverWakesBeforeItsWakeTime(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		j := jobs.MustDefine("sleep-ns", func(in string) string { return in }, jobs.NoTenant[string](),
			func(c *jobs.Ctx, in string) (string, error) {
				if err := jobs.Sleep(c, "nap", 1500*time.Nanosecond); err != nil {
					return "", err
				}
				return "woke", nil
			})
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, "a")
		env.Await(id, store.StateSuspended)
		env.Advance(time.Microsecond) // 0.5 µs before the wake time
		run, err := env.Engine.GetRun(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if run.State != store.StateSuspended {
			t.Fatalf("a sleep of 1.5µs is %s 1µs after it began (history %v); want still suspended", run.State, testenv.Kinds(env.History(id)))
		}
		env.Advance(time.Microsecond)
		env.Await(id, store.StateCompleted)
	})
}

// Equal numbers compare equal in a match, as PublishRequest.Match and history.MatchKeys promise
// ("1, int64(1) and 1.0 are equal"): a payload field 2^53 sent as a float reaches a wait on the
// integer 2^53.
func TestWholeNumbersPast2To53MatchAsEqual(t *testing.T) {
	const big = int64(1) << 53
	ints, err := history.MatchKeys(map[string]any{"id": big})
	if err != nil {
		t.Fatal(err)
	}
	floats, err := history.MatchKeys(map[string]any{"id": float64(big)})
	if err != nil {
		t.Fatal(err)
	}
	env := newEnv(t)
	j := jobs.MustDefine("big-id", func(in int64) string { return "k" }, jobs.NoTenant[int64](),
		func(c *jobs.Ctx, id int64) (bool, error) {
			_, ok, err := jobs.WaitForEvent[map[string]any](c, "paid", "big.paid", jobs.Match{"id": id}, time.Hour)
			return ok, err
		})
	env.Worker(worker.Config{}, j)
	id := enqueue(t, env, j, big)
	env.Await(id, store.StateSuspended)
	res, err := env.Engine.Publish(t.Context(), "big.paid", map[string]any{"id": float64(big)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Delivered != 1 {
		t.Fatalf("a float64 2^53 payload field reached %d waits on int64 2^53, want 1 (canonical pairs %q vs %q)", res.Delivered, ints, floats)
	}
}

type refValue struct {
	ID string `json:"id"`
}

type refEvent struct {
	Ref  refValue `json:"ref"`
	Note string   `json:"note"`
}

// A wait whose match holds a struct receives an event whose payload holds the same struct: the
// payload is encoded by json tags (jobs.Encode), and a match value is canonicalised alike. With
// msgpack's default (Go field names) the wait's pair was ref={"ID":"o-1"} while the event's is
// ref={"id":"o-1"}, and the event was lost.
func TestAStructMatchValueMatchesItsPayload(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		j := jobs.MustDefine("struct-match", func(in string) string { return in }, jobs.NoTenant[string](),
			func(c *jobs.Ctx, order string) (string, error) {
				e, ok, err := jobs.WaitForEvent[refEvent](c, "ref", "ref.paid", jobs.Match{"ref": refValue{ID: order}}, time.Hour)
				if err != nil || !ok {
					return "timeout", err
				}
				return e.Note, nil
			})
		env.Worker(worker.Config{}, j)
		id := enqueue(t, env, j, "o-1")
		env.Await(id, store.StateSuspended)
		res, err := env.Engine.Publish(t.Context(), "ref.paid", refEvent{Ref: refValue{ID: "o-1"}, Note: "paid"})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := history.MatchKeys(map[string]any{"ref": refValue{ID: "o-1"}})
		payload, _ := jobs.Encode(refEvent{Ref: refValue{ID: "o-1"}})
		have, _ := history.FieldKeys(payload)
		if res.Delivered != 1 {
			t.Fatalf("the event reached %d waits, want 1: the wait matches %q, the event has %q", res.Delivered, want, have)
		}
		run := env.Await(id, store.StateCompleted)
		if got, _ := j.Result(run.Result); got != "paid" {
			t.Fatalf("result %q, want paid", got)
		}
	})
}
