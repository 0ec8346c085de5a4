package engine_test

import (
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store/memory"
)

// A schedule's or backfill's declaration is filed under its entry's name and read by the name in
// its data. A worker's entry "sneaky" whose data named "nightly" stood in for nightly's schedule,
// and beside nightly's own made the scheduler refuse both as declared twice. Such a manifest is
// refused whole (X_JOB_DEFINITION) and nothing of it is kept; an entry whose data names it is
// taken.
func TestADeclarationWhoseDataNamesAnotherIsRefused(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	job := jobs.MustDefine("digest", func(any) string { return "d" }, jobs.NoTenant[any](),
		func(*jobs.Ctx, any) (any, error) { return nil, nil }, jobs.Queue("q"))
	good, err := scheduler.Define("nightly", job, "0 3 * * *", "UTC", map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := jobs.NewRegistry(job)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Declare(good.Declaration()); err != nil {
		t.Fatal(err)
	}
	decls, err := reg.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Engine.DeclareManifest(t.Context(), frontend.Manifest{WorkerID: "honest", Queues: []string{"q"}, Declarations: decls}); err != nil {
		t.Fatalf("a schedule whose data names it: %v", err)
	}
	for _, kind := range []string{jobs.DeclareSchedule, jobs.DeclareBackfill} {
		forged := good.Declaration()
		forged.Kind, forged.Name = kind, "sneaky" // the data still names "nightly"
		forged.Checksum = jobs.Checksum(forged.Data)
		_, err := env.Engine.DeclareManifest(t.Context(), frontend.Manifest{WorkerID: "forger", Queues: []string{"q"},
			Declarations: append(decls[:len(decls):len(decls)], forged)})
		if !jobs.HasCode(err, jobs.CodeJobDefinition) {
			t.Fatalf("a %s entry whose data names another: %v; want %s", kind, err, jobs.CodeJobDefinition)
		}
	}
	views, err := env.Engine.Declarations(t.Context(), jobs.DeclareSchedule)
	if err != nil {
		t.Fatal(err)
	}
	if len(views) != 1 || views[0].Name != "nightly" || len(views[0].Workers) != 1 {
		t.Fatalf("declared schedules %+v; want nightly from the honest worker alone", views)
	}
	scheds, err := engine.DeclaredLive[scheduler.Schedule](t.Context(), env.Engine, jobs.DeclareSchedule)
	if err != nil || len(scheds) != 1 || scheds[0].Name != "nightly" {
		t.Fatalf("live schedules %+v (%v)", scheds, err)
	}
}
