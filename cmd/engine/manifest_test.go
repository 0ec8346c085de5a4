package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
)

// TestManifestCommand: `manifest` shows what a worker declared, and `manifest --json` is the
// API's projection, kind filter included.
func TestManifestCommand(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	reg, err := jobs.NewRegistry(testenv.Untyped("send-invoice", "billing"))
	if err != nil {
		t.Fatal(err)
	}
	sched, err := jobs.NewDeclaration(jobs.DeclareSchedule, "nightly", map[string]string{"name": "nightly", "cron": "0 3 * * *", "job": "send-invoice"})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Declare(sched); err != nil {
		t.Fatal(err)
	}
	decls, err := reg.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.env.Engine.DeclareManifest(context.Background(), frontendManifest("worker-1", []string{"billing"}, decls)); err != nil {
		t.Fatal(err)
	}
	r := o.run(t, "manifest", "--json")
	expect(t, r, 0, "")
	var v engine.ManifestView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if len(v.Declarations) != 2 || v.Declarations[0].Kind != "job" || v.Declarations[0].Name != "send-invoice" ||
		!v.Declarations[0].Live || v.Declarations[0].Workers[0].WorkerID != "worker-1" || v.Declarations[1].Kind != "schedule" {
		t.Fatalf("manifest %+v", v)
	}
	if len(v.Workers) != 1 || v.Workers[0].ID != "worker-1" || v.Workers[0].Queues[0] != "billing" {
		t.Fatalf("workers %+v", v.Workers)
	}
	r = o.run(t, "manifest", "--kind", "schedule", "--json")
	expect(t, r, 0, "")
	if !strings.Contains(r.stdout, `"nightly"`) || strings.Contains(r.stdout, `"send-invoice",`) && strings.Contains(r.stdout, `"kind": "job"`) {
		t.Fatalf("schedules only: %s", r.stdout)
	}
	r = o.run(t, "manifest")
	expect(t, r, 0, "")
	for _, want := range []string{"send-invoice", "nightly", "worker-1", "billing", "IN FLIGHT", "CONFLICT"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("the table lacks %q:\n%s", want, r.stdout)
		}
	}
}

func frontendManifest(worker string, queues []string, decls []jobs.Declaration) frontend.Manifest {
	return frontend.Manifest{WorkerID: worker, Queues: queues, Declarations: decls}
}
