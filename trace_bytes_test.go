package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// A traceparent of a later version may carry fields after the flags, which the W3C parser
// skips unread. Those fields are stored with the run, shown in its view and sent to every
// worker, so the engine holds them to the grammar of the fields it knows (lowercase hex, joined
// by "-"): a NUL, a control character, an escape sequence or invalid UTF-8 there is refused with
// X_BAD_REQUEST and creates nothing, on every store, rather than being stored (memory, SQLite)
// or failing the insert with an internal error (Postgres, whose text refuses NUL and invalid
// UTF-8). A later version whose extra fields follow that grammar is taken as it is.
func TestATraceparentsExtraFieldsAreHeldToItsGrammar(t *testing.T) {
	t.Parallel()
	const head = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		t.Parallel()
		for i, bad := range []string{
			head + "-\x00",
			head + "-\x1b[2J\x1b[31mOK",
			head + "-line\nInjected: yes",
			head + "-\xff\xfe",
			head + "-NOT-HEX",
			head + "- ",
		} {
			req := jobs.EnqueueRequest{Job: "j", Key: fmt.Sprintf("bad-%d", i), NoTenant: true, TraceParent: bad}
			if _, err := env.Engine.Enqueue(t.Context(), req); jobs.CodeOf(err) != jobs.CodeBadRequest {
				t.Errorf("traceparent %q: %v, want X_BAD_REQUEST", bad, err)
			}
		}
		runs, err := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "j"})
		if err != nil || len(runs) != 0 {
			t.Errorf("%d runs (%v) after refused enqueues, want none", len(runs), err)
		}
		good := head + "-0123abcd"
		res, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "j", Key: "good", NoTenant: true, TraceParent: good})
		if err != nil {
			t.Fatalf("traceparent %q: %v, want it taken", good, err)
		}
		run, err := env.Engine.GetRun(t.Context(), res.RunID)
		if err != nil || run.TraceParent != good {
			t.Errorf("run's traceparent %q (%v), want %q", run.TraceParent, err, good)
		}
	})
}

// An attempt the worker ends at the job's timeout ends its claim's span too, with the outcome
// timed-out and the timeout as its error: the outcomes a claim's span names are the worker's
// (completed, failed, suspended, blocked, aborted, timed-out, start-failed), not only the
// body's.
func TestAnAttemptPastItsTimeoutEndsItsSpanTimedOut(t *testing.T) {
	t.Parallel()
	tr := newTracing(t)
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	job := jobs.MustDefine("stuck", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) {
			return jobs.Step(c, "wait", func(ctx context.Context) (string, error) {
				<-ctx.Done()
				return "", ctx.Err()
			})
		}, jobs.Timeout(time.Minute), jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
	env.Worker(worker.Config{TracerProvider: tr.tp}, job)
	if _, err := job.Enqueue(t.Context(), env.Engine, "s1"); err != nil {
		t.Fatal(err)
	}
	fake := env.Clock.(*clock.Fake)
	deadline := time.Now().Add(10 * time.Second)
	for len(tr.named(worker.AttemptSpanPrefix+"stuck")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no attempt span ended; ended: %v", tr.names())
		}
		if len(tr.rec.Started()) > 0 {
			fake.Advance(time.Minute)
		}
		time.Sleep(5 * time.Millisecond)
	}
	span := tr.named(worker.AttemptSpanPrefix + "stuck")[0]
	if got := attr(span, "jobs.outcome"); got != "timed-out" || span.Status().Code != codes.Error ||
		!strings.Contains(span.Status().Description, string(jobs.CodeTimeout)) {
		t.Errorf("attempt span: outcome %q, status %v, want timed-out with the timeout as its error", got, span.Status())
	}
}
