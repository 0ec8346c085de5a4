package api_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// queue_dead_jobs{queue} counts the dead-lettered runs of each queue: the alert "a payment was
// dead-lettered" reads it. A run that failed for good in "payments" shows there, and only there;
// a completed run elsewhere counts nothing.
func TestQueueDeadJobsCountsADeadLetteredRun(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	dead := jobs.MustDefine("charge", func(int) string { return "c" }, jobs.NoTenant[int](),
		func(*jobs.Ctx, int) (int, error) { return 0, errors.New("card declined") },
		jobs.Queue("payments"), jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
	fine := jobs.MustDefine("receipt", func(int) string { return "r" }, jobs.NoTenant[int](),
		func(*jobs.Ctx, int) (int, error) { return 1, nil })
	b.env.Worker(worker.Config{}, dead, fine)
	ctx := context.Background()
	d, err := dead.Enqueue(ctx, b.env.Engine, 1)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fine.Enqueue(ctx, b.env.Engine, 1)
	if err != nil {
		t.Fatal(err)
	}
	b.env.Await(d.RunID, store.StateFailed)
	b.env.Await(f.RunID, store.StateCompleted)

	st, _, out := b.call(t, http.MethodGet, "/metrics", "", "", nil)
	if st != http.StatusOK {
		t.Fatalf("metrics = %d %s", st, out)
	}
	for _, want := range []string{`queue_dead_jobs{queue="payments"} 1`, `queue_dead_jobs{queue="default"} 0`} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, grepLines(string(out), "queue_dead_jobs"))
		}
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
