package engine_test

import (
	"strings"
	"testing"

	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// A job declared differently by two current workers (two builds of one name) is said in the
// log when the second declaration arrives, once, not at every resend of the manifest; a job
// declared alike is not.
func TestAConflictingDeclarationIsLoggedOnce(t *testing.T) {
	t.Parallel()
	logs := &testenv.LogBuffer{}
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Logger: logs.Logger()})
	testenv.Declare(t, env.Engine, "w1", testenv.Untyped("export", "q1"), testenv.Untyped("audit", "q1"))
	if strings.Contains(logs.String(), "jobs.manifest.conflict") {
		t.Fatalf("one worker's manifest logged a conflict:\n%s", logs.String())
	}
	testenv.Declare(t, env.Engine, "w2", testenv.Untyped("export", "q2"), testenv.Untyped("audit", "q1"))
	testenv.Declare(t, env.Engine, "w2", testenv.Untyped("export", "q2"), testenv.Untyped("audit", "q1")) // a resend
	out := logs.String()
	if n := strings.Count(out, "jobs.manifest.conflict"); n != 1 || !strings.Contains(out, "job=export") || !strings.Contains(out, "worker=w2") {
		t.Fatalf("%d conflict lines, want 1 naming export and w2:\n%s", n, out)
	}
}
