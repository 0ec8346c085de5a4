package wrap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/codec/aesgcm"
	"github.com/ultimat3/jobs/codec/wrap"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

type order struct {
	ID   string `json:"id"`
	Card string `json:"card"`
}

// charge stores the card in its input and in a step's output, sleeps (so a deploy can change the
// codec under it), then records a second step and returns both.
var charge = jobs.MustDefine("charge", func(o order) string { return o.ID }, jobs.NoTenant[order](),
	func(c *jobs.Ctx, o order) (string, error) {
		token, err := jobs.Step(c, "tokenize", func(context.Context) (string, error) { return "tok-" + o.Card, nil })
		if err != nil {
			return "", err
		}
		if err := jobs.Sleep(c, "settle", time.Hour); err != nil {
			return "", err
		}
		receipt, err := jobs.Step(c, "receipt", func(context.Context) (string, error) { return "receipt-" + o.ID, nil })
		if err != nil {
			return "", err
		}
		return token + "|" + receipt, nil
	}, jobs.Queue("pay"))

func aesSet(t *testing.T, current string, ids ...string) *codec.Set {
	t.Helper()
	keys := map[string][]byte{}
	for i, id := range ids {
		keys[id] = bytes.Repeat([]byte{byte(i + 1)}, 32)
	}
	c, err := aesgcm.New(current, keys)
	if err != nil {
		t.Fatal(err)
	}
	return codec.NewSet(c)
}

// codecOf returns the codec id a stored payload names, or "" for a plain one.
func codecOf(b []byte) string {
	e, _ := codec.Unseal(b)
	return e.ID
}

// The engine stores only ciphertext (input, step outputs, result) and shows it as such; the job
// sees plain values; after a key rotation mid-run, replay opens the old payloads with the old key
// and new ones are written under the new key.
func TestCodecEndToEnd(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		const card = "4242-4242-4242-4242"
		v1 := aesSet(t, "k1", "k1")
		w1 := env.Worker(worker.Config{ID: "w1", Frontend: wrap.Frontend(env.Engine, v1)}, charge)
		res, err := charge.Enqueue(ctx, wrap.Enqueuer(env.Engine, v1), order{ID: "o1", Card: card})
		if err != nil {
			t.Fatal(err)
		}
		env.Await(res.RunID, store.StateSuspended)

		// What the store holds: envelopes under k1, never the card.
		raw, err := env.Store.HistoryRead(ctx, res.RunID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range raw {
			if bytes.Contains(e.Data, []byte(card)) {
				t.Errorf("event %d (%s) holds the card in the clear", e.Seq, e.Kind)
			}
		}
		p, _ := raw[0].Decode()
		if got := codecOf(p.(history.RunStarted).Input); got != "aesgcm/k1" {
			t.Errorf("the stored input is under %q, want aesgcm/k1", got)
		}
		run, _ := env.Store.RunGet(ctx, res.RunID)
		if codecOf(run.Input) != "aesgcm/k1" || bytes.Contains(run.Input, []byte(card)) {
			t.Errorf("the run row's input is not encrypted: %q", run.Input)
		}
		// The operator's views show what each payload is, without the key.
		var dump bytes.Buffer
		if err := history.Dump(&dump, raw); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(dump.String(), `"output":"encrypted by codec aesgcm/k1, `) {
			t.Errorf("history dump does not say the step output is encrypted:\n%s", dump.String())
		}
		view, err := env.Engine.InspectRun(ctx, res.RunID)
		if err != nil {
			t.Fatal(err)
		}
		js, _ := json.Marshal(view)
		if !strings.Contains(string(js), "encrypted by codec aesgcm/k1") || strings.Contains(string(js), card) {
			t.Errorf("jobs show: %s", js)
		}
		// With the codec, a library dump shows the plain values.
		dump.Reset()
		if err := history.DumpWith(&dump, raw, v1.Open); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(dump.String(), "tok-"+card) {
			t.Errorf("DumpWith the codec does not show the output:\n%s", dump.String())
		}

		// A deploy rotates the key while the run sleeps: the new workers encrypt under k2 and
		// keep k1 to read what was written before.
		if err := w1.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		v2 := aesSet(t, "k2", "k1", "k2")
		env.Worker(worker.Config{ID: "w2", Frontend: wrap.Frontend(env.Engine, v2)}, charge)
		env.Advance(time.Hour)
		done := env.Await(res.RunID, store.StateCompleted)
		if codecOf(done.Result) != "aesgcm/k2" {
			t.Errorf("result under %q, want aesgcm/k2", codecOf(done.Result))
		}
		plain, err := v2.Open(done.Result)
		if err != nil {
			t.Fatal(err)
		}
		got, err := charge.Result(plain)
		if err != nil || got != "tok-"+card+"|receipt-o1" {
			t.Errorf("result %q, %v: the replayed step must come back from its k1 payload", got, err)
		}
		byName := map[string]string{}
		for _, e := range env.History(res.RunID) {
			if e.Kind == history.KindStepCompleted {
				p, _ := e.Decode()
				byName[e.Name] = codecOf(p.(history.StepCompleted).Output)
			}
		}
		if byName["tokenize"] != "aesgcm/k1" || byName["receipt"] != "aesgcm/k2" {
			t.Errorf("step payloads under %v, want tokenize k1 and receipt k2", byName)
		}
	})
}

// A worker without the codec cannot read the input: the attempt fails with X_ENCODING naming the
// codec, instead of running the job on a zero value.
func TestCodecMissingFailsLoudly(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: testenv.OpenSQLite(t)})
	ctx := context.Background()
	set := aesSet(t, "k1", "k1")
	once := jobs.MustDefine("once", func(o order) string { return o.ID }, jobs.NoTenant[order](),
		func(c *jobs.Ctx, o order) (string, error) { return o.Card, nil }, jobs.Queue("q"),
		jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
	env.Worker(worker.Config{ID: "plain"}, once)
	res, err := once.Enqueue(ctx, wrap.Enqueuer(env.Engine, set), order{ID: "x", Card: "c"})
	if err != nil {
		t.Fatal(err)
	}
	run := env.Await(res.RunID, store.StateFailed)
	if run.ErrorCode != string(jobs.CodeEncoding) || !strings.Contains(run.Error, "aesgcm/k1") {
		t.Errorf("failed with %s %q, want X_ENCODING naming aesgcm/k1", run.ErrorCode, run.Error)
	}
}

// A worker whose Set holds the key of a Stack(Gzip(), aes) payload but not the compression under
// it opens what it can and fails on the rest with X_ENCODING naming deflate, the codec it lacks:
// naming aesgcm/k1, whose key it holds, sent the operator after the wrong codec. That holds for
// the task's input and for a payload replayed from the history, and no error carries the value.
func TestStackMissingInnerCodecNamesIt(t *testing.T) {
	t.Parallel()
	const card = "4242-4242-4242-4242"
	a, err := aesgcm.New("k1", map[string][]byte{"k1": bytes.Repeat([]byte{1}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	stacked, keyOnly := codec.NewSet(codec.Stack(codec.Gzip(), a)), codec.NewSet(a)
	named := func(what string, code jobs.Code, msg string) {
		t.Helper()
		if code != jobs.CodeEncoding || !strings.Contains(msg, "by codec deflate") ||
			strings.Contains(msg, "aesgcm") || strings.Contains(msg, card) {
			t.Errorf("%s: %s %q; want X_ENCODING naming deflate alone, without the value", what, code, msg)
		}
	}

	env := testenv.Start(t, testenv.Options{Store: testenv.OpenSQLite(t)})
	once := jobs.MustDefine("stacked-once", func(o order) string { return o.ID }, jobs.NoTenant[order](),
		func(c *jobs.Ctx, o order) (string, error) { return o.Card, nil }, jobs.Queue("q"),
		jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
	env.Worker(worker.Config{ID: "key-only", Frontend: wrap.Frontend(env.Engine, keyOnly)}, once)
	res, err := once.Enqueue(context.Background(), wrap.Enqueuer(env.Engine, stacked), order{ID: "x", Card: card})
	if err != nil {
		t.Fatal(err)
	}
	run := env.Await(res.RunID, store.StateFailed)
	named("the run's attempt", jobs.Code(run.ErrorCode), run.Error)

	plain, _ := jobs.Encode(card)
	sealed, err := stacked.Encode(plain)
	if err != nil {
		t.Fatal(err)
	}
	ev := history.NewStep(time.Unix(0, 0), history.StepCompleted{StepName: "s", Output: sealed})
	ev.Seq = 2
	p, err := wrap.OpenEvent(ev, keyOnly).Decode()
	if err != nil {
		t.Fatal(err)
	}
	var v string
	err = jobs.Decode(p.(history.StepCompleted).Output, &v)
	named("a replayed step's output", jobs.CodeOf(err), fmt.Sprint(err))
}

// A child's sealed result reaches its parent inside the outcome the engine records in the clear
// (an EventReceived whose payload is a jobs.ChildOutcome), one level below the payload fields the
// views look at. Every view shows it as a stored value is: without the key it says what the
// result is, in the dump, the console's timeline (history.View) and jobs show (InspectRun), and
// with the codec a library dump shows the plain value; never the envelope's bytes in base64.
func TestChildResultShownInViews(t *testing.T) {
	t.Parallel()
	child := jobs.MustDefine("shown-child", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) { return "secret-" + s, nil })
	parent := jobs.MustDefine("shown-parent", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (int, error) {
			v, err := child.Call(c, "c", s)
			return len(v), err
		})
	env := testenv.Start(t, testenv.Options{Store: testenv.OpenSQLite(t)})
	ctx := context.Background()
	set := aesSet(t, "k1", "k1")
	env.Worker(worker.Config{ID: "w", Frontend: wrap.Frontend(env.Engine, set)}, child, parent)
	res, err := parent.Enqueue(ctx, wrap.Enqueuer(env.Engine, set), "a")
	if err != nil {
		t.Fatal(err)
	}
	env.Await(res.RunID, store.StateCompleted)
	events := env.History(res.RunID)
	i := slices.IndexFunc(events, func(e history.Event) bool { return e.Kind == history.KindEventReceived })
	if i < 0 {
		t.Fatalf("no EventReceived in the parent's history: %v", events)
	}
	p, _ := events[i].Decode()
	var o jobs.ChildOutcome
	if x := p.(history.EventReceived); !history.IsChildEventID(x.EventID) || jobs.Decode(x.Payload, &o) != nil || codecOf(o.Result) != "aesgcm/k1" {
		t.Fatalf("the parent received %+v, want a child's outcome with its result under aesgcm/k1", x)
	}
	const sealed, plain = `"result":"encrypted by codec aesgcm/k1, `, `"result":"secret-a"`

	view, _ := json.Marshal(history.View(events[i]))
	var dump bytes.Buffer
	if err := history.Dump(&dump, events); err != nil {
		t.Fatal(err)
	}
	show, err := env.Engine.InspectRun(ctx, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	wait, _ := json.Marshal(show.Steps)
	for what, got := range map[string]string{"history.View": string(view), "the dump": dump.String(), "InspectRun": string(wait)} {
		if !strings.Contains(got, sealed) || strings.Contains(got, "secret-a") {
			t.Errorf("%s does not say what the child's result is: %s", what, got)
		}
	}

	opened, _ := json.Marshal(history.ViewWith(events[i], set.Open))
	dump.Reset()
	if err := history.DumpWith(&dump, events, set.Open); err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string]string{"history.ViewWith": string(opened), "DumpWith": dump.String()} {
		if !strings.Contains(got, plain) {
			t.Errorf("%s with the codec does not show the child's result: %s", what, got)
		}
	}
}

// A child run's result is stored encrypted, and the engine hands it to the parent inside the
// outcome it records in the clear: the parent reads the plain result, whether it waited while
// the child ran, found the child already finished, or replays the recorded outcome on another
// worker.
func TestChildResultThroughCodec(t *testing.T) {
	t.Parallel()
	child := jobs.MustDefine("sealed-child", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) { return "secret-" + s, nil })
	waitsAtOnce := jobs.MustDefine("waits-at-once", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) {
			v, err := child.Call(c, "c", s)
			if err != nil {
				return "", err
			}
			if err := jobs.Sleep(c, "nap", time.Hour); err != nil {
				return "", err
			}
			return v, nil
		}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
	waitsLater := jobs.MustDefine("waits-later", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) {
			r, err := child.StartChild(c, "c", s)
			if err != nil {
				return "", err
			}
			if err := jobs.Sleep(c, "nap", time.Hour); err != nil {
				return "", err
			}
			return r.Wait(c)
		}, jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		ctx := context.Background()
		set := aesSet(t, "k1", "k1")
		w1 := env.Worker(worker.Config{ID: "w1", Frontend: wrap.Frontend(env.Engine, set)}, child, waitsAtOnce, waitsLater)
		a, err := waitsAtOnce.Enqueue(ctx, wrap.Enqueuer(env.Engine, set), "a")
		if err != nil {
			t.Fatal(err)
		}
		b, err := waitsLater.Enqueue(ctx, wrap.Enqueuer(env.Engine, set), "b")
		if err != nil {
			t.Fatal(err)
		}
		// Both parents asleep (a parent waiting for its child is suspended too: wait for the nap).
		for _, id := range []string{a.RunID, b.RunID} {
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if evs := env.History(id); slices.ContainsFunc(evs, func(e history.Event) bool { return e.Kind == history.KindTimerStarted }) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("parent %s never slept", id)
				}
			}
			env.Await(id, store.StateSuspended)
		}
		// Both children finish, their results sealed; then a new worker replays the parents.
		var children []store.Run
		for deadline := time.Now().Add(10 * time.Second); len(children) < 2; time.Sleep(5 * time.Millisecond) {
			if children, err = env.Engine.ListRuns(ctx, store.ListParams{Job: "sealed-child", Limit: 10}); err != nil || time.Now().After(deadline) {
				t.Fatalf("children: %v %v", children, err)
			}
		}
		for _, r := range children {
			run := env.Await(r.ID, store.StateCompleted)
			if codecOf(run.Result) != "aesgcm/k1" {
				t.Fatalf("child %s's result is stored under %q, want aesgcm/k1", r.ID, codecOf(run.Result))
			}
		}
		if err := w1.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		env.Worker(worker.Config{ID: "w2", Frontend: wrap.Frontend(env.Engine, set)}, child, waitsAtOnce, waitsLater)
		env.Advance(time.Hour)
		for id, want := range map[string]string{a.RunID: "secret-a", b.RunID: "secret-b"} {
			done := env.Await(id, store.StateCompleted, store.StateFailed)
			if done.State != store.StateCompleted {
				t.Fatalf("parent %s %s: %s %s", id, done.State, done.ErrorCode, done.Error)
			}
			plain, err := set.Open(done.Result)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := waitsAtOnce.Result(plain); err != nil || got != want {
				t.Fatalf("parent %s's result %q, %v; want %q", id, got, err, want)
			}
		}
	})
}
