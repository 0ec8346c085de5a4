package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// events publish --match sends the fields waits match on beside the payload: the waiting run is
// matched on them though the payload has no such field.
func TestPublishMatch(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	def := jobs.MustDefine("await-plan", func(org string) string { return org }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, org string) (string, error) {
			p, _, err := jobs.WaitForEvent[map[string]string](c, "plan", "plan.picked", jobs.Match{"orgId": org}, time.Hour)
			return p["plan"], err
		})
	o.env.Worker(worker.Config{}, def)
	res, err := def.Enqueue(context.Background(), o.env.Engine, "a")
	if err != nil {
		t.Fatal(err)
	}
	o.env.Await(res.RunID, store.StateSuspended)
	expect(t, o.run(t, "events", "publish", "plan.picked", "--payload", `{"plan":"pro"}`, "--match", `[1]`), 2, "X_BAD_REQUEST: --match must be a JSON object")
	r := o.run(t, "events", "publish", "plan.picked", "--payload", `{"plan":"pro"}`, "--match", `{"orgId":"a"}`, "--json")
	expect(t, r, 0, "")
	var pub jobs.Published
	if err := json.Unmarshal([]byte(r.stdout), &pub); err != nil || pub.Delivered != 1 {
		t.Fatalf("publish --match printed %q; want one delivery", r.stdout)
	}
	run := o.env.Await(res.RunID, store.StateCompleted)
	if got, _ := def.Result(run.Result); got != "pro" {
		t.Errorf("result %q, want pro", got)
	}
}
