package outbox

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// billJob runs on its own queue, as a job whose workers are sized apart does.
var billJob = jobs.MustDefine("bill",
	func(in Note) string { return "bill:" + in.ID }, jobs.NoTenant[Note](),
	func(c *jobs.Ctx, in Note) (string, error) { return "billed " + in.ID, nil }, jobs.Queue("billing"))

// A producer without the job's code enqueues untyped, naming no queue, as it may through the
// engine or api.Client, which fill in the queue the job is declared on. Through the outbox the
// row is staged naming no queue either, so the engine fills it in at publish: the run lands on
// the job's queue, and the rows behind it go out in the same pass. Were the outbox to name
// "default" for it, the engine would refuse the row with X_JOB_UNDECLARED, which holds the row in
// place, and every row staged after it would wait for ever.
func TestUntypedRowNamingNoQueueGoesToTheDeclaredQueue(t *testing.T) {
	eachBackendWith(t, testenv.Options{RequireDeclared: true}, func(t *testing.T, b backend, env *testenv.Env) {
		env.Worker(workerConfig(), noteJob, billJob)
		ob := newOutbox(t, b, env, Required)
		req := jobs.EnqueueRequest{Job: "bill", Key: "bill:b1", NoTenant: true}
		bill := stageWith(t, b, func(tx Tx) (jobs.EnqueueResult, error) { return ob.Enqueue(WithTx(t.Context(), tx), req) })
		stage(t, b, ob, "1", "2")

		// The row keeps the request as the caller made it.
		peek, err := b.outbox.Claim(t.Context(), "peek", env.Clock.Now(), DefaultLease, 10)
		if err != nil || len(peek) != 3 || peek[0].ID != bill {
			t.Fatalf("claim: %d rows, %v; want 3, the bill first", len(peek), err)
		}
		if q := peek[0].Request.Queue; q != "" {
			t.Errorf("staged row names queue %q, want none: the engine resolves it at publish", q)
		}
		if _, err := b.outbox.Release(t.Context(), "peek", rowIDs(peek)); err != nil {
			t.Fatal(err)
		}

		r := newRelay(t, b, env, env.Engine, "r1", 10)
		if n := pass(t, r); n != 3 {
			t.Fatalf("published %d rows, want 3", n)
		}
		if n := backlogOf(t, b.outbox); n != 0 {
			t.Errorf("backlog %d, want 0", n)
		}
		runs, err := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "bill"})
		if err != nil || len(runs) != 1 || runs[0].Queue != "billing" {
			t.Fatalf("bill runs %+v (%v), want one on queue billing", runs, err)
		}
		if got := len(runsOf(t, env)); got != 2 {
			t.Errorf("%d note runs, want the 2 staged after the bill", got)
		}
	})
}

// A row naming a job no worker declares holds its place by design (a rolling deploy ends it),
// so one naming a job no deploy will ever declare, a misspelt name, holds the whole outbox. The
// operator sets it aside: it becomes a failed row (listed, requeued or dropped as any), and the
// rows behind it go out in their order at the next pass.
func TestHeldRowIsSetAsideByTheOperator(t *testing.T) {
	eachBackendWith(t, testenv.Options{RequireDeclared: true}, func(t *testing.T, b backend, env *testenv.Env) {
		env.Worker(workerConfig(), noteJob)
		ob := newOutbox(t, b, env, Required)
		first := stage(t, b, ob, "1")
		typo := stageWith(t, b, func(tx Tx) (jobs.EnqueueResult, error) {
			return ob.Enqueue(WithTx(t.Context(), tx), jobs.EnqueueRequest{Job: "nte", Key: "nte:x", NoTenant: true})
		})
		stage(t, b, ob, "2", "3")
		rec := &recorder{next: env.Engine}
		r := newRelay(t, b, env, rec, "r1", 10)
		for range 2 {
			n, err := r.Pass(t.Context())
			if !jobs.HasCode(err, jobs.CodeJobUndeclared) || !strings.Contains(err.Error(), typo) ||
				!strings.Contains(err.Error(), "SetAside") {
				t.Fatalf("pass: %d, %v; want a stop at row %s with X_JOB_UNDECLARED that names the way out", n, err, typo)
			}
		}
		if got, want := rec.published(), keys("1"); !slices.Equal(got, want) {
			t.Fatalf("published %v, want %v", got, want)
		}
		if n := backlogOf(t, b.outbox); n != 3 {
			t.Fatalf("backlog %d, want the held row and the 2 behind it", n)
		}

		// A set-aside that names no code is refused and changes nothing.
		n, err := b.outbox.SetAside(t.Context(), []string{typo}, "", "no code", env.Clock.Now())
		wantCode(t, "set aside with no code", err, jobs.CodeBadRequest)
		if n != 0 || backlogOf(t, b.outbox) != 3 {
			t.Fatalf("a refused set-aside moved %d rows (backlog %d)", n, backlogOf(t, b.outbox))
		}

		at := env.Clock.Now()
		if n, err := b.outbox.SetAside(t.Context(), []string{typo, "no-such-row", first[0]}, jobs.CodeJobUndeclared,
			"job nte is a misspelling of note", at); err != nil || n != 1 {
			t.Fatalf("set aside: %d, %v; want 1 (the published row and the unknown id are passed over)", n, err)
		}
		if n, err := b.outbox.SetAside(t.Context(), []string{typo}, jobs.CodeJobUndeclared, "again", at); err != nil || n != 0 {
			t.Errorf("a second set-aside: %d, %v; want 0", n, err)
		}
		rows, total := failedRows(t, b.outbox)
		if total != 1 || len(rows) != 1 {
			t.Fatalf("failed rows %+v (total %d), want the set-aside one", rows, total)
		}
		f := rows[0]
		if f.ID != typo || f.ErrorCode != jobs.CodeJobUndeclared || f.ErrorMessage != "job nte is a misspelling of note" ||
			f.Request.Job != "nte" || f.ClaimedBy != "" {
			t.Errorf("failed row %s: job %q code %s message %q claimed by %q", f.ID, f.Request.Job, f.ErrorCode, f.ErrorMessage, f.ClaimedBy)
		}
		if d := f.FailedAt.Sub(at); d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("failed at %s, want %s", f.FailedAt, at)
		}

		if n := pass(t, r); n != 2 {
			t.Fatalf("after the set-aside the relay published %d rows, want 2", n)
		}
		if got, want := rec.published(), keys("1", "2", "3"); !slices.Equal(got, want) {
			t.Errorf("published %v, want %v", got, want)
		}
		if n, err := b.outbox.Drop(t.Context(), []string{typo}); err != nil || n != 1 {
			t.Fatalf("drop: %d, %v; want 1", n, err)
		}
		if _, total := failedRows(t, b.outbox); total != 0 || backlogOf(t, b.outbox) != 0 {
			t.Errorf("after the drop: %d failed rows, backlog %d; want none", total, backlogOf(t, b.outbox))
		}
	})
}

// A row set aside while a relay is publishing it stays failed: the relay's mark matches rows in
// line only. Requeued, it is published again under its dedupe id, and the engine answers with
// the run the first publish created: one run, never two.
func TestSetAsideDuringPublishKeepsOneRun(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, env *testenv.Env) {
		ob := newOutbox(t, b, env, Required)
		ids := stage(t, b, ob, "1")
		r := newRelay(t, b, env, env.Engine, "r1", 10)
		r.afterPublish = func(int) bool {
			if n, err := b.outbox.SetAside(t.Context(), ids, jobs.CodeJobUndeclared, "set aside mid-publish", env.Clock.Now()); err != nil || n != 1 {
				t.Errorf("set aside mid-publish: %d, %v; want 1", n, err)
			}
			return true
		}
		if _, err := r.Pass(t.Context()); err != nil {
			t.Fatal(err)
		}
		r.afterPublish = nil
		if _, total := failedRows(t, b.outbox); total != 1 {
			t.Fatalf("%d failed rows, want the one set aside mid-publish", total)
		}
		if n, err := b.outbox.Requeue(t.Context(), ids); err != nil || n != 1 {
			t.Fatalf("requeue: %d, %v", n, err)
		}
		if n := pass(t, r); n != 1 {
			t.Fatalf("published %d, want 1", n)
		}
		if runs := runsOf(t, env)["note:1"]; len(runs) != 1 {
			t.Errorf("%d runs of the row, want 1", len(runs))
		}
		if _, total := failedRows(t, b.outbox); total != 0 || backlogOf(t, b.outbox) != 0 {
			t.Errorf("%d failed, backlog %d; want none", total, backlogOf(t, b.outbox))
		}
	})
}
