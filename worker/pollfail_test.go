package worker

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
)

// An engine away for a while costs a poller one warning, a reminder a minute, and one line when
// it is back, not a warning per retry.
func TestAPollerThatKeepsFailingSaysSoOnce(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil)) // info and above
	var f pollFailures
	t0 := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	down := jobs.Errorf(jobs.CodeEngineUnreachable, "nothing listens")
	for i := range 50 { // 50 retries over 49 s
		f.failed(log, "default", down, t0.Add(time.Duration(i)*time.Second))
	}
	if n := strings.Count(buf.String(), "jobs.poll.failed"); n != 1 {
		t.Fatalf("%d warnings for 50 failures in 49s, want 1:\n%s", n, buf.String())
	}
	f.failed(log, "default", down, t0.Add(61*time.Second)) // a minute on: a reminder with the count
	if n := strings.Count(buf.String(), "jobs.poll.failed"); n != 2 || !strings.Contains(buf.String(), "failures=51") {
		t.Fatalf("after a minute: %d warnings, want 2, the second counting 51:\n%s", n, buf.String())
	}
	f.failed(log, "default", errors.New("a different failure"), t0.Add(62*time.Second))
	if n := strings.Count(buf.String(), "jobs.poll.failed"); n != 3 {
		t.Fatalf("a different failure: %d warnings, want it said at once:\n%s", n, buf.String())
	}
	f.recovered(log, "default", t0.Add(70*time.Second))
	if !strings.Contains(buf.String(), "jobs.poll.recovered") || !strings.Contains(buf.String(), "failures=52") || !strings.Contains(buf.String(), "after=1m10s") {
		t.Fatalf("recovery line missing or wrong:\n%s", buf.String())
	}
	// Back to normal: the next failure warns at once, and a success says nothing.
	buf.Reset()
	f.recovered(log, "default", t0.Add(71*time.Second))
	f.failed(log, "default", down, t0.Add(72*time.Second))
	if n := strings.Count(buf.String(), "jobs.poll.failed"); n != 1 || strings.Contains(buf.String(), "recovered") {
		t.Fatalf("after a recovery:\n%s", buf.String())
	}
}
