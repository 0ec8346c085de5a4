package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// `jobs show` and `history dump` link a parent and its child both ways.
func TestShowAndDumpLinkParentAndChildren(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	type in struct {
		ID string `json:"id"`
	}
	child := jobs.MustDefine("child-job", func(i in) string { return "c:" + i.ID }, jobs.NoTenant[in](),
		func(c *jobs.Ctx, i in) (string, error) { return "hi " + i.ID, nil })
	parent := jobs.MustDefine("parent-job", func(i in) string { return "p:" + i.ID }, jobs.NoTenant[in](),
		func(c *jobs.Ctx, i in) (string, error) { return child.Call(c, "greet", i) })
	o.env.Worker(worker.Config{}, child, parent)
	res, err := parent.Enqueue(t.Context(), o.env.Engine, in{ID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	o.env.Await(res.RunID, store.StateCompleted)

	r := o.run(t, "jobs", "show", res.RunID, "--json")
	expect(t, r, 0, "")
	var v engine.RunView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || len(v.Children) != 1 || v.Children[0].Name != "greet" {
		t.Fatalf("jobs show --json: %v\n%s", err, r.stdout)
	}
	kid := v.Children[0].RunID
	r = o.run(t, "jobs", "show", res.RunID)
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "Children") || !strings.Contains(r.stdout, kid) {
		t.Errorf("jobs show does not list the child:\n%s", r.stdout)
	}
	r = o.run(t, "jobs", "show", kid)
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "Parent") || !strings.Contains(r.stdout, res.RunID) {
		t.Errorf("jobs show of the child does not name its parent:\n%s", r.stdout)
	}
	r = o.run(t, "history", "dump", res.RunID, "--format", "table")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "child:  "+kid) || !strings.Contains(r.stdout, "ChildEnqueued") {
		t.Errorf("history dump --format table does not link the child:\n%s", r.stdout)
	}
	r = o.run(t, "history", "dump", kid, "--format", "table")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, "parent: "+res.RunID) {
		t.Errorf("history dump --format table does not link the parent:\n%s", r.stdout)
	}
	// The replayable dump links them in its events: the parent's ChildEnqueued names the child.
	r = o.run(t, "history", "dump", res.RunID)
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, `"run_id":"`+kid+`"`) {
		t.Errorf("the jsonl dump does not name the child:\n%s", r.stdout)
	}
}
