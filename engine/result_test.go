package engine_test

import (
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
)

// A failed run's stored error is its attempt's error as the worker printed it, "CODE: …"; the
// result's error says the code once.
func TestAFailedRunsResultSaysItsCodeOnce(t *testing.T) {
	for _, c := range []struct{ code, stored, want string }{
		{"X_BAD_REQUEST", "X_BAD_REQUEST: wake time is out of range", "X_BAD_REQUEST: wake time is out of range"},
		{"X_APP", "plain text from an app", "X_APP: plain text from an app"},
		{"", "attempts exhausted; X_APP_BUSY: later", "X_JOB_MAX_ATTEMPTS: attempts exhausted; X_APP_BUSY: later"},
	} {
		res := engine.ResultOf(store.Run{ID: "r", State: store.StateFailed, ErrorCode: c.code, Error: c.stored})
		if res.Error == nil || res.Error.Error() != c.want {
			t.Errorf("stored %q under %q: %v, want %q", c.stored, c.code, res.Error, c.want)
		}
		if c.code != "" && !jobs.HasCode(res.Error, jobs.Code(c.code)) {
			t.Errorf("stored under %q: the error's code is %s", c.code, jobs.CodeOf(res.Error))
		}
	}
}
