package refuse_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/refuse"
)

func TestOf(t *testing.T) {
	t.Parallel()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	coded := jobs.Errorf(jobs.CodeRunNotFound, "run r1")
	secret := errors.New("dial 10.0.0.5: password hunter2 refused")
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		err     error
		code    jobs.Code
		message string // "" is not checked
		logged  string // the log line's level and event; "" logs nothing
	}{
		{"a coded error is the caller's", context.Background(), fmt.Errorf("lookup: %w", coded), jobs.CodeRunNotFound, "run r1", ""},
		{"an uncoded error is not shown", context.Background(), secret, jobs.CodeInternal, "internal error; the engine logged it", "level=ERROR msg=jobs.test.internal"},
		{"a store's deadline may be retried", context.Background(), fmt.Errorf("query: %w", context.DeadlineExceeded), jobs.CodeStoreUnavailable, "", ""},
		{"nobody reads a cancelled call's answer", gone, secret, jobs.CodeDraining, "", "level=DEBUG msg=jobs.test.client-gone"},
	} {
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		e := refuse.Of(tc.ctx, log, "jobs.test", tc.err, "tool", "t1")
		if e.Code != tc.code || (tc.message != "" && e.Message != tc.message) {
			t.Errorf("%s: %v; want %s %q", tc.name, e, tc.code, tc.message)
		}
		if tc.code == jobs.CodeInternal && strings.Contains(e.Message, "hunter2") {
			t.Errorf("%s: the refusal repeats the error's text: %q", tc.name, e.Message)
		}
		l := logs.String()
		if tc.logged == "" && l != "" || tc.logged != "" && (!strings.Contains(l, tc.logged) || !strings.Contains(l, "tool=t1") || !strings.Contains(l, "hunter2")) {
			t.Errorf("%s: logged %q; want %q with the attrs and the error", tc.name, l, tc.logged)
		}
	}
}
