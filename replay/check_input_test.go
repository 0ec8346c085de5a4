package replay_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/replay"
)

// A history Check cannot replay because of what it was given is the caller's error, with a
// code: an empty one (an empty testdata file: a dump redirected from a command that failed),
// one that does not start with its RunStarted, and a file Load refuses (cut short, edited). It
// used to be X_INVARIANT ("a bug") for the first two, and no code at all for the file.
func TestCheckRefusesWhatIsNotAHistoryWithACode(t *testing.T) {
	t.Parallel()
	def := jobs.MustDefine("checked", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) {
			return jobs.Step(c, "a", func(context.Context) (string, error) { return "x", nil })
		})
	if err := replay.Check(t.Context(), def, nil); jobs.CodeOf(err) != jobs.CodeBadRequest || !strings.Contains(err.Error(), "empty") {
		t.Errorf("Check of no events: %v; want X_BAD_REQUEST naming an empty history", err)
	}
	step := history.New(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC), history.StepCompleted{StepName: "a", Output: mustEncode(t, "x")})
	step.Seq = 1
	if err := replay.Check(t.Context(), def, []history.Event{step}); jobs.CodeOf(err) != jobs.CodeBadRequest || !strings.Contains(err.Error(), "RunStarted") {
		t.Errorf("Check of a history without its RunStarted: %v; want X_BAD_REQUEST naming the RunStarted", err)
	}

	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := replay.CheckFile(t.Context(), def, empty); jobs.CodeOf(err) != jobs.CodeBadRequest {
		t.Errorf("CheckFile of an empty file: %v; want X_BAD_REQUEST", err)
	}
	cut := filepath.Join(dir, "cut.jsonl")
	if err := os.WriteFile(cut, []byte(`{"seq":1,"kind":"RunStarted","at":"2026-01-05T09:00:00Z","da`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := replay.CheckFile(t.Context(), def, cut); jobs.CodeOf(err) != jobs.CodeEncoding || !strings.Contains(err.Error(), "line 1") || !strings.Contains(err.Error(), cut) {
		t.Errorf("CheckFile of a file cut short: %v; want X_ENCODING naming the file and the line", err)
	}
}

func mustEncode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := jobs.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
