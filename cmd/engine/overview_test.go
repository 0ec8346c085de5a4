package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
)

// The CLI's overview is the engine's projection, the same one /_x renders.
func TestOverviewCommand(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	ctx := context.Background()
	var ids []string
	for _, k := range []string{"a", "b", "c"} {
		res, err := o.env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Queue: "payments", Key: k, NoTenant: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.RunID)
	}
	if _, err := o.env.Engine.Cancel(ctx, ids[0], "test"); err != nil {
		t.Fatal(err)
	}
	r := o.run(t, "overview", "--json")
	expect(t, r, 0, "")
	var got engine.Overview
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("overview --json: %v\n%s", err, r.stdout)
	}
	want, err := o.env.Engine.InspectOverview(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Queues) != 1 || got.Queues[0].Counts["ready"] != 2 || got.Queues[0].Window["cancelled"] != 1 ||
		got.Queues[0].Finished[14].Cancelled != want.Queues[0].Finished[14].Cancelled || !got.Queues[0].Since.Equal(want.Queues[0].Since) {
		t.Errorf("overview --json = %+v, want %+v", got, want)
	}
	r = o.run(t, "overview")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "payments") || !strings.Contains(r.stdout, "FINISHED/MIN") {
		t.Errorf("overview table:\n%s", r.stdout)
	}
	expect(t, o.run(t, "overview", "--window", "1m", "--bucket", "1h"), 2, "X_BAD_REQUEST: ")
}
