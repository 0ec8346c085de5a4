package jobs_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// twiceNamed is a sync input whose map names "customer" twice: first decoy, then real. A Go
// decoder keeps the last value, so the body sees real.
func twiceNamed(t *testing.T, decoy, real string, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := msgpack.NewEncoder(&b)
	for _, err := range []error{enc.EncodeMapLen(3), enc.EncodeString("customer"), enc.EncodeString(decoy),
		enc.EncodeString("customer"), enc.EncodeString(real), enc.EncodeString("n"), enc.EncodeInt(int64(n))} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var in syncInput
	if err := jobs.Decode(b.Bytes(), &in); err != nil || in.Customer != real {
		t.Fatalf("the body decodes customer %q (%v), want %q", in.Customer, err, real)
	}
	return b.Bytes()
}

// An input that names the field a keyed limit counts by twice is refused at enqueue
// (X_FLOW_KEY), and creates nothing. The body's decoder keeps the last value while a walk that
// stopped at the first counted that one, so every run of customer "a" could count under a
// decoy value of its own and run past the cap. The same holds for a field on the way to the key.
func TestAKeyedLimitRefusesAnInputNamingItsFieldTwice(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: testenv.Backends()[0].Open(t), RequireDeclared: true})
	j := syncJob(jobs.ConcurrencyBy(jobs.ByInput("customer"), 1))
	testenv.Declare(t, env.Engine, "w", j)
	for i := range 2 {
		_, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "sync", Key: fmt.Sprint("k", i), Tenant: "a",
			Input: twiceNamed(t, fmt.Sprint("decoy-", i), "a", i)})
		if jobs.CodeOf(err) != jobs.CodeFlowKey {
			t.Errorf("enqueue %d: %v, want %s", i, err, jobs.CodeFlowKey)
		}
	}
	if tasks := pollAll(t, env.Engine, "w"); len(tasks) > 1 {
		t.Fatalf("%d runs of customer %v running at once under a cap of 1", len(tasks), customers(t, tasks))
	}
	runs, _ := env.Engine.ListRuns(t.Context(), store.ListParams{Limit: 10})
	if len(runs) != 0 {
		t.Errorf("refused enqueues created %d runs", len(runs))
	}

	// On the way to the key: {"account": {"id": "decoy"}, "account": {"id": "a"}}.
	var b bytes.Buffer
	enc := msgpack.NewEncoder(&b)
	_ = enc.EncodeMapLen(2)
	for _, id := range []string{"decoy", "a"} {
		_ = enc.EncodeString("account")
		_ = enc.Encode(map[string]any{"id": id})
	}
	if _, _, err := jobs.KeyValue(jobs.ByInput("account.id"), "a", false, b.Bytes()); jobs.CodeOf(err) != jobs.CodeFlowKey {
		t.Errorf("account named twice: %v, want %s", err, jobs.CodeFlowKey)
	}
	// A field the key does not count by may be named twice: it changes no count.
	b.Reset()
	_ = enc.EncodeMapLen(3)
	for _, s := range []string{"n", "1", "n", "2", "customer", "a"} {
		_ = enc.EncodeString(s)
	}
	if v, counted, err := jobs.KeyValue(jobs.ByInput("customer"), "a", false, b.Bytes()); err != nil || !counted || v != "a" {
		t.Errorf("another field named twice: %q %v %v, want a counted", v, counted, err)
	}
}

// A run stored with its key's field named twice (enqueued before the limit was declared) counts
// under the one shared unreadable value at claim, like any run whose key cannot be read, rather
// than under whichever copy the walk met first.
func TestARunNamingItsKeyTwiceCountsAsUnreadableAtClaim(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: testenv.Backends()[0].Open(t)})
	for i := range 2 {
		if _, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "sync", Queue: "sync", Key: fmt.Sprint("k", i),
			Tenant: "a", Input: twiceNamed(t, fmt.Sprint("decoy-", i), "a", i)}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Declare(t, env.Engine, "w", syncJob(jobs.ConcurrencyBy(jobs.ByInput("customer"), 1)))
	if tasks := pollAll(t, env.Engine, "w"); len(tasks) != 1 {
		t.Fatalf("claimed %d runs of customer %v at once under a cap of 1, want 1", len(tasks), customers(t, tasks))
	}
}
