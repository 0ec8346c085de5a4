package engine_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

var bulkDeclared = jobs.MustDefine("bulk-declared", func(i int) string { return fmt.Sprint(i) }, jobs.NoTenant[int](),
	func(*jobs.Ctx, int) (int, error) { return 0, nil })

// EnqueueMany on every store: an item the engine refuses (an undeclared job, a dedupe id) is
// answered in its place and the others are created; a call over the limit writes nothing.
func TestEnqueueManyRefusals(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{RequireDeclared: true}, func(t *testing.T, env *testenv.Env) {
		testenv.Declare(t, env.Engine, "w1", bulkDeclared)
		ok, err := bulkDeclared.Request(1)
		if err != nil {
			t.Fatal(err)
		}
		undeclared := ok
		undeclared.Job, undeclared.Key = "nobody-hosts-this", "u"
		withDedupe := ok
		withDedupe.Key, withDedupe.DedupeID = "d", "d1"
		items, err := env.Engine.EnqueueMany(t.Context(), []jobs.EnqueueRequest{undeclared, ok, withDedupe})
		if err != nil {
			t.Fatal(err)
		}
		if it := items[0]; it.Error == nil || it.Error.Code != jobs.CodeJobUndeclared || it.RunID != "" {
			t.Errorf("the undeclared job's item: %+v; want X_JOB_UNDECLARED", it)
		}
		if it := items[1]; it.Error != nil || it.RunID == "" || it.Deduped {
			t.Errorf("the declared job's item: %+v; want a new run", it)
		}
		if it := items[2]; it.Error == nil || it.Error.Code != jobs.CodeBadRequest {
			t.Errorf("the item with a dedupe id: %+v; want X_BAD_REQUEST", it)
		}
		if _, err := env.Engine.GetRun(t.Context(), items[1].RunID); err != nil {
			t.Errorf("the created run: %v", err)
		}

		many := make([]jobs.EnqueueRequest, jobs.MaxEnqueueMany+1)
		for i := range many {
			many[i] = ok
			many[i].Key = fmt.Sprintf("many-%d", i)
		}
		if _, err := env.Engine.EnqueueMany(t.Context(), many); jobs.CodeOf(err) != jobs.CodePayloadTooLarge {
			t.Errorf("%d items: %v; want X_PAYLOAD_TOO_LARGE", len(many), err)
		}
		runs, err := env.Store.RunList(t.Context(), store.ListParams{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 1 {
			t.Errorf("%d runs stored, want only the declared item's", len(runs))
		}
	})
}

// A batch's run ids ascend in (job, key) order, the order the store writes the batch in, so
// that every id-ordered index takes the batch in ascending order; each item still names the
// run of its own key.
func TestEnqueueManyIDsFollowKeys(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		const n = 150 // past the Postgres store's COPY threshold
		reqs := make([]jobs.EnqueueRequest, n)
		for i := range reqs {
			req, err := bulkDeclared.Request(n - i) // keys "150", "149", … : neither id nor key order
			if err != nil {
				t.Fatal(err)
			}
			reqs[i] = req
		}
		items, err := env.Engine.EnqueueMany(t.Context(), reqs)
		if err != nil {
			t.Fatal(err)
		}
		byKey := map[string]string{}
		for i, it := range items {
			if it.Error != nil || it.RunID == "" {
				t.Fatalf("item %d: %+v", i, it)
			}
			run, err := env.Engine.GetRun(t.Context(), it.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if run.Key != reqs[i].Key {
				t.Fatalf("item %d (key %q) names run %s of key %q", i, reqs[i].Key, it.RunID, run.Key)
			}
			byKey[run.Key] = it.RunID
		}
		keys := slices.Sorted(maps.Keys(byKey))
		for i := 1; i < len(keys); i++ {
			if byKey[keys[i-1]] >= byKey[keys[i]] {
				t.Fatalf("key %q has run %s, key %q run %s: ids do not ascend with keys",
					keys[i-1], byKey[keys[i-1]], keys[i], byKey[keys[i]])
			}
		}
	})
}
