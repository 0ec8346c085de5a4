package examples_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/examples"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/replay"
)

// TestRecordedHistoriesReplay is the deploy regression test: every history recorded under
// testdata/ (by `engine history dump`, or by this package's tests with -update) must replay
// against the current code of its job. A change that renames, reorders or removes a durable
// call fails here before it blocks the runs in flight in production.
func TestRecordedHistoriesReplay(t *testing.T) {
	if *update {
		t.Skip("-update is rewriting testdata/: run again without it")
	}
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("found %d recorded histories under testdata/, want the onboarding and both order outcomes", len(files))
	}
	reg := examples.Registry()
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			def := jobOf(t, reg, file)
			if err := replay.CheckFile(context.Background(), def, file); err != nil {
				t.Fatalf("%s no longer replays against %s: %v", file, def.Name(), err)
			}
		})
	}
}

// jobOf finds the job a dump is a history of, from its RunStarted event.
func jobOf(t *testing.T, reg *jobs.Registry, file string) jobs.Definition {
	t.Helper()
	events, err := loadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 || events[0].Kind != history.KindRunStarted {
		t.Fatalf("%s does not start with RunStarted", file)
	}
	p, err := events[0].Decode()
	if err != nil {
		t.Fatal(err)
	}
	name := p.(history.RunStarted).Job
	def, ok := reg.Get(name)
	if !ok {
		t.Fatalf("%s is a history of %q, which the examples no longer define", file, name)
	}
	return def
}

func loadFile(path string) ([]history.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return history.Load(f)
}
